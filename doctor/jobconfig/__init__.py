"""The job's configuration: the config file, durations, the timeout chain and the lane."""
