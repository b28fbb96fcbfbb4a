"""A chunk of goroutines, in a module of its own: mypyc (:mod:`cfsim._native`) cannot compile a
subclass of ``list``, so this one stays interpreted while :mod:`cfsim.workloads._request_source`
is compiled."""


class _Chunk(list):
    """The goroutines (run-queue entries) of a chunk, in the order it runs them: the first taken
    from the queues, each after it a stand-in for the goroutine the one before readies into the
    P's runnext, which that one's end creates (:meth:`RequestSource._finish_chunk`)."""

    __slots__ = ()
