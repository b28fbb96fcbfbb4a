"""What the model's answers about the Go runtime's own overheads rest on, and where they stop.

* :mod:`.coverage` -- where a scenario lies outside what the lab grids (a 2-CPU host) and the
  public many-core measurements cover, and whether its answer depends on unpinned parameters;
* :mod:`.band` -- the headline keys at the low and the high corner of the unpinned priors;
* :mod:`.public` -- the public measurements of GOMAXPROCS above the limit and of many-core
  runtime costs, as scenarios beside the model: fit on some, compared on the others.
"""
