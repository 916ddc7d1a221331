"""The network between processors: its topology (:mod:`.topology`: processors, links,
routes), the collectives as schedules of transfers on a group of processors
(:mod:`.collectives`, lowered per algorithm by :mod:`.algorithms`) and the time of a
schedule on the links without contention (:mod:`.cost`).

It reads the hardware spec's ``interconnect`` section and nothing later in the data
flow; the timing reads it.
"""
