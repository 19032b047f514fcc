"""Where grading tasks run: in this process, in a local process pool, or on a Dask cluster.

Each is a ``concurrent.futures.Executor`` (Dask's through ``Client.get_executor()``), so the
grading code submits the same picklable tasks to any of them.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import Executor, ProcessPoolExecutor
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def grading_executor(jobs: int = 1, scheduler: str | None = None) -> Iterator[tuple[Executor | None, int]]:
    """(executor, number of workers); the executor is None for grading in this process.

    ``scheduler``: the address of a Dask scheduler (``tcp://host:8786``). Its workers need
    this course's package installed, from the same commit; they share no files with this
    machine, because tasks carry the notebooks and the solutions as bytes.
    """
    if scheduler:
        try:
            from distributed import Client
        except ImportError:
            raise ValueError("--scheduler needs Dask: pip install 'dask[distributed]'") from None
        if scheduler.startswith("tls://") and not dask_tls_configured():
            raise ValueError(
                f"{scheduler} is a TLS scheduler: give its certificates through DASK_DISTRIBUTED__COMM__TLS__CA_FILE, "
                "..._TLS__CLIENT__CERT and ..._TLS__CLIENT__KEY (docs/instructors.md, Grading on a cluster)"
            )
        try:
            client = Client(scheduler, timeout="20s")
        except (OSError, TimeoutError) as error:
            raise ValueError(f"cannot reach the Dask scheduler at {scheduler}: {error}") from None
        with client:
            workers = max(1, len(client.scheduler_info().get("workers", {})))
            # pure=False: two identical submissions are still two grading runs, each with its own row.
            yield client.get_executor(pure=False), workers
    elif jobs > 1:
        # spawn, not fork: a forked copy of a process with threads (tqdm, zmq) can deadlock.
        with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            yield pool, jobs
    else:
        yield None, 1


def dask_tls_configured() -> bool:
    """Whether Dask's configuration names the CA file and a client certificate and key (what a TLS client needs)."""
    import dask

    names = ("distributed.comm.tls.ca-file", "distributed.comm.tls.client.cert", "distributed.comm.tls.client.key")
    return all(dask.config.get(name, None) for name in names)
