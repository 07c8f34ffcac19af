"""Detect a stall from progress, diagnose it once, act by verdict (``launch --wrap --watch``).

The room's parts, data flowing one way:

* ``doctor.jobconfig.watch_settings`` — ``[watch]`` and the policy table ``[watch.actions]``;
* ``detector``  — pure: per-rank progress readings -> the job's learned step time -> a stall;
* ``policy``    — pure: a verdict and the watcher's history -> one decision;
* ``progress``  — readings from the ranks' progress files, Flight Recorder, ``/proc``;
* ``roster``    — who the ranks are now (registry or discovery), pid + start time checked;
* ``diagnose``  — triage's collection and classification, then the bundle, before any action;
* ``actions``   — a decision carried out through the restart wrapper's store;
* ``events``    — one JSON line per decision in the job's ``events.jsonl``;
* ``watcher``   — the loop, in its own process (a rank holding the GIL cannot stop it);
* ``stopper``   — the in-rank half of a stop for ranks the wrapper cannot unwind.
"""
