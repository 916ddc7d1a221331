"""The compiled event loop's pieces: its records (:mod:`.records`), event queue and
unit stores (:mod:`.queues`), unit state machine (:mod:`.units`) and transfers
(:mod:`.transfers`); :mod:`accelsim.timing.event_loop` runs them."""
