"""Energy: a pure function from event counts to an energy breakdown."""
