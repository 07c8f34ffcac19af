"""From evidence to one verdict: rules propose candidates, ``classify`` picks one."""
