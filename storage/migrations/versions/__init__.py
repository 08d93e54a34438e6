"""One module per revision, oldest first. Never edit a released revision: add one."""
