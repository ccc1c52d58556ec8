"""The Python peers of JobKitPostgres on one PostgreSQL server: drain, end to end, idle latency.

Run by peers.sh (which installs the pinned packages into a virtual environment and starts a
throwaway server); not in CI. Environment: DSN (the server), N (tasks per run, default 10000),
WORKERS (default "1 2 4"), ROUNDS (default 1), SAMPLES (latency samples, default 100), PEERS
(default "pgqueuer procrastinate oban dbos").

Each peer runs no-op tasks with its documented API and its default settings, except a worker
concurrency of 16 where the peer has one (JobKit's RemoteWorker default). Workers are child
processes of this script (`python peers.py worker PEER CONCURRENCY`).

- drain: N tasks enqueued in one batch (the peer's batch API) while the workers wait; the time
  from the enqueue until no task is left unfinished (the harness polls the peer's table every
  10 ms). Before each run a task per worker must complete (the workers are up), then 1 s.
- CPU seconds per 1,000 tasks: the workers, the producer (this process, end to end) and the
  server (the postmaster, its live children and those it reaped), from /proc/<pid>/stat.
- end to end: the producer enqueues the N tasks (batch API) and awaits each one's completion
  with the peer's own API for it (pgqueuer's CompletionWatcher, dbos's handles); a peer without
  one (procrastinate, oban) is polled every 10 ms, and says so.
- latency: one task at a time on an idle queue, from the enqueue to the completion the producer
  sees (same waiting as end to end; polled every 2 ms where the peer has no API).
"""

from __future__ import annotations

import asyncio
import os
import resource
import statistics
import subprocess
import sys
import time

DSN = os.environ.get("DSN", "")
CONCURRENCY = 16


# MARK: - pgqueuer


class PgQueuer:
    name = "pgqueuer"
    polled = False

    async def connect(self):
        import asyncpg
        from pgqueuer import AsyncpgDriver, Queries

        self.connection = await asyncpg.connect(DSN)
        self.driver = AsyncpgDriver(self.connection)
        self.queries = Queries(self.driver)

    async def setup(self):
        exists = await self.connection.fetchval("SELECT to_regclass('pgqueuer') IS NOT NULL")
        if not exists:
            await self.queries.install()

    async def reset(self):
        await self.connection.execute("TRUNCATE pgqueuer, pgqueuer_log")

    async def enqueue(self, count):
        return await self.queries.enqueue(["noop"] * count, [b"x"] * count, [0] * count)

    async def unfinished(self):
        return await self.connection.fetchval("SELECT count(*) FROM pgqueuer")

    async def wait_all(self, ids):
        from pgqueuer.core.completion import CompletionWatcher

        async with CompletionWatcher(self.driver, queries=self.queries) as watcher:
            await asyncio.gather(*[watcher.wait_for(i) for i in ids])

    async def close(self):
        await self.connection.close()

    @staticmethod
    async def worker(concurrency):
        import asyncpg
        from pgqueuer import AsyncpgDriver, PgQueuer

        connection = await asyncpg.connect(DSN)
        pgq = PgQueuer(AsyncpgDriver(connection))

        @pgq.entrypoint("noop")
        async def noop(job):
            return None

        await pgq.run()


# MARK: - procrastinate


def procrastinate_app():
    import procrastinate

    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=DSN))

    @app.task(name="noop", queue="bench")
    async def noop(i: int):
        return None

    return app, noop


class Procrastinate:
    name = "procrastinate"
    polled = True

    async def connect(self):
        self.app, self.task = procrastinate_app()
        await self.app.open_async()

    async def setup(self):
        rows = await self.app.connector.execute_query_all_async(
            "SELECT to_regclass('procrastinate_jobs') IS NOT NULL AS found"
        )
        if not rows[0]["found"]:
            await self.app.schema_manager.apply_schema_async()

    async def reset(self):
        await self.app.connector.execute_query_async("TRUNCATE procrastinate_jobs CASCADE")

    async def enqueue(self, count):
        return await self.task.batch_defer_async(*[{"i": k} for k in range(count)])

    async def unfinished(self):
        rows = await self.app.connector.execute_query_all_async(
            "SELECT count(*) AS n FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"
        )
        return rows[0]["n"]

    async def wait_all(self, ids, interval=0.01):
        while True:
            rows = await self.app.connector.execute_query_all_async(
                "SELECT count(*) AS n FROM procrastinate_jobs WHERE id = ANY(%(ids)s) "
                "AND status NOT IN ('succeeded', 'failed', 'cancelled', 'aborted')",
                ids=list(ids),
            )
            if rows[0]["n"] == 0:
                return
            await asyncio.sleep(interval)

    async def close(self):
        await self.app.close_async()

    @staticmethod
    async def worker(concurrency):
        app, _ = procrastinate_app()
        async with app.open_async():
            await app.run_worker_async(queues=["bench"], concurrency=concurrency, wait=True)


# MARK: - oban (oban-py)


def oban_worker_class():
    from oban import worker

    @worker(queue="bench")
    class Noop:
        async def process(self, job):
            return None

    return Noop


class Oban:
    name = "oban"
    polled = True

    async def connect(self):
        from oban import Oban as Client

        self.pool = await Client.create_pool(DSN)
        self.client = Client(pool=self.pool)
        self.noop = oban_worker_class()

    async def setup(self):
        from oban.schema import install

        async with self.pool.connection() as connection:
            found = await (await connection.execute("SELECT to_regclass('oban_jobs') IS NOT NULL")).fetchone()
        if not found[0]:
            await install(self.pool)
        await self.client.start()

    async def reset(self):
        async with self.pool.connection() as connection:
            await connection.execute("TRUNCATE oban_jobs")

    async def enqueue(self, count):
        jobs = await self.client.enqueue_many([self.noop.new({"i": k}) for k in range(count)])
        return [job.id for job in jobs]

    async def unfinished(self):
        async with self.pool.connection() as connection:
            row = await (
                await connection.execute(
                    "SELECT count(*) FROM oban_jobs WHERE state IN ('available', 'scheduled', 'executing', 'retryable')"
                )
            ).fetchone()
        return row[0]

    async def wait_all(self, ids, interval=0.01):
        while True:
            async with self.pool.connection() as connection:
                row = await (
                    await connection.execute(
                        "SELECT count(*) FROM oban_jobs WHERE id = ANY(%s) "
                        "AND state NOT IN ('completed', 'discarded', 'cancelled')",
                        (list(ids),),
                    )
                ).fetchone()
            if row[0] == 0:
                return
            await asyncio.sleep(interval)

    async def close(self):
        await self.client.stop()
        await self.pool.close()

    @staticmethod
    async def worker(concurrency):
        from oban import Oban as Server

        oban_worker_class()
        pool = await Server.create_pool(DSN)
        async with Server(pool=pool, queues={"bench": concurrency}):
            await asyncio.Event().wait()


# MARK: - dbos


def dbos_url():
    """The server as SQLAlchemy names it (psycopg 3)."""
    return DSN.replace("postgres://", "postgresql+psycopg://", 1)


class Dbos:
    name = "dbos"
    polled = False

    async def connect(self):
        import asyncpg
        from dbos import DBOSClient

        self.connection = await asyncpg.connect(DSN)
        if not await self.connection.fetchval("SELECT to_regclass('dbos.workflow_status') IS NOT NULL"):
            # The schema is made by a launching application: a worker, until it exists.
            worker = start_workers(Dbos, 1)[0]
            while not await self.connection.fetchval("SELECT to_regclass('dbos.workflow_status') IS NOT NULL"):
                if worker.poll() is not None:
                    raise RuntimeError("the dbos worker exited before it made its schema")
                await asyncio.sleep(0.2)
            await asyncio.sleep(2)
            stop_workers([worker])
        self.client = DBOSClient(system_database_url=dbos_url())

    async def setup(self):
        pass

    async def reset(self):
        await self.connection.execute("TRUNCATE dbos.workflow_status CASCADE")

    async def enqueue(self, count):
        options = {"queue_name": "bench", "workflow_name": "noop"}
        return await asyncio.gather(*[self.client.enqueue_async(options, k) for k in range(count)])

    async def unfinished(self):
        return await self.connection.fetchval(
            "SELECT count(*) FROM dbos.workflow_status WHERE status IN ('ENQUEUED', 'PENDING')"
        )

    async def wait_all(self, handles):
        await asyncio.gather(*[handle.get_result() for handle in handles])

    async def close(self):
        self.client.destroy()
        await self.connection.close()

    @staticmethod
    async def worker(concurrency):
        import uuid

        from dbos import DBOS

        DBOS(
            config={
                "name": "jobkit-peers",
                "system_database_url": dbos_url(),
                "executor_id": f"peers-{uuid.uuid4()}",
                "log_level": "WARNING",
            }
        )
        @DBOS.workflow(name="noop")
        async def noop(i: int) -> int:
            return i

        DBOS.launch()
        await DBOS.register_queue_async("bench", worker_concurrency=concurrency)
        await asyncio.Event().wait()


PEERS = {peer.name: peer for peer in [PgQueuer, Procrastinate, Oban, Dbos]}


# MARK: - Harness


def cpu_of(pids):
    """utime + stime of the processes, in seconds (0 for a process that is gone)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
        except OSError:
            pass
    return total


POSTMASTER = None


def server_cpu():
    """The server's CPU seconds: the postmaster with the children it reaped, and its live children."""
    if POSTMASTER is None:
        return 0.0
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry) == POSTMASTER:
            total += sum(int(v) for v in fields[11:15]) / tick
        elif int(fields[1]) == POSTMASTER:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def own_cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def start_workers(peer, count):
    return [
        subprocess.Popen([sys.executable, __file__, "worker", peer.name, str(CONCURRENCY)])
        for _ in range(count)
    ]


def stop_workers(workers):
    for worker in workers:
        worker.kill()
    for worker in workers:
        worker.wait()


async def settle(instance, workers):
    """Lets the workers start and listen (none of the peers says when it listens): a task per
    worker must complete, then a second more."""
    await instance.enqueue(workers)
    while await instance.unfinished() > 0:
        await asyncio.sleep(0.05)
    await asyncio.sleep(1.0)


async def drain(peer, instance, workers, n):
    await instance.reset()
    children = start_workers(peer, workers)
    try:
        await settle(instance, workers)
        cpu_before = cpu_of([c.pid for c in children]) + server_cpu()
        start = time.perf_counter()
        await instance.enqueue(n)
        while await instance.unfinished() > 0:
            await asyncio.sleep(0.01)
        elapsed = time.perf_counter() - start
        cpu = cpu_of([c.pid for c in children]) + server_cpu() - cpu_before
    finally:
        stop_workers(children)
    return n / elapsed, cpu * 1000 / n


async def end_to_end(peer, instance, workers, n):
    await instance.reset()
    children = start_workers(peer, workers)
    try:
        await settle(instance, workers)
        cpu_before = cpu_of([c.pid for c in children]) + own_cpu() + server_cpu()
        start = time.perf_counter()
        ids = await instance.enqueue(n)
        await instance.wait_all(ids)
        elapsed = time.perf_counter() - start
        cpu = cpu_of([c.pid for c in children]) + own_cpu() + server_cpu() - cpu_before
    finally:
        stop_workers(children)
    return n / elapsed, cpu * 1000 / n


async def latency(peer, instance, samples):
    await instance.reset()
    children = start_workers(peer, 1)
    times = []
    try:
        await settle(instance, 1)
        for index in range(samples + 5):
            start = time.perf_counter()
            ids = await instance.enqueue(1)
            if instance.polled:
                await instance.wait_all(ids, interval=0.002)
            else:
                await instance.wait_all(ids)
            if index >= 5:
                times.append((time.perf_counter() - start) * 1000)
    finally:
        stop_workers(children)
    return sorted(times)


def percentile(values, p):
    rank = max(1, int(round(len(values) * p + 0.4999)))
    return values[min(len(values), rank) - 1]


async def main():
    n = int(os.environ.get("N", "10000"))
    counts = [int(c) for c in os.environ.get("WORKERS", "1 2 4").split()]
    rounds = int(os.environ.get("ROUNDS", "1"))
    samples = int(os.environ.get("SAMPLES", "100"))
    names = [name for name in os.environ.get("PEERS", " ".join(PEERS)).split() if name in PEERS]
    results = {name: {"drain": {c: [] for c in counts}, "e2e": {c: [] for c in counts}, "latency": []} for name in names}
    global POSTMASTER
    import asyncpg

    connection = await asyncpg.connect(DSN)
    backend = await connection.fetchval("SELECT pg_backend_pid()")
    with open(f"/proc/{backend}/stat") as f:
        POSTMASTER = int(f.read().rsplit(")", 1)[1].split()[1])
    await connection.close()
    instances = {}
    for name in names:
        instance = PEERS[name]()
        await instance.connect()
        await instance.setup()
        instances[name] = instance
    for round_ in range(1, rounds + 1):
        for name in names:
            peer, instance = PEERS[name], instances[name]
            for count in counts:
                print(f"peers: round {round_}: {name}, drain, {count} worker(s)", file=sys.stderr)
                results[name]["drain"][count].append(await drain(peer, instance, count, n))
                print(f"peers: round {round_}: {name}, end to end, {count} worker(s)", file=sys.stderr)
                results[name]["e2e"][count].append(await end_to_end(peer, instance, count, n))
            print(f"peers: round {round_}: {name}, latency", file=sys.stderr)
            results[name]["latency"] += await latency(peer, instance, samples)
    for instance in instances.values():
        await instance.close()

    def rate(runs):
        return f"{statistics.median(r[0] for r in runs):.0f}"

    def cpu(runs):
        return f"{statistics.median(r[1] for r in runs):.2f}"

    print(f"{n} no-op tasks per run, {rounds} round(s), medians; worker concurrency {CONCURRENCY}")
    print()
    header = " / ".join(str(c) for c in counts)
    print(f"| | drain, {header} workers (tasks/s) | end to end, {header} workers (tasks/s) "
          f"| CPU s per 1,000 tasks, drain (workers + server) "
          f"| CPU s per 1,000 tasks, end to end (workers + producer + server) | idle latency p50 / p99 (ms) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in names:
        r = results[name]
        lat = r["latency"]
        print(
            f"| {name}{' (polled)' if PEERS[name].polled else ''} "
            f"| {' / '.join(rate(r['drain'][c]) for c in counts)} "
            f"| {' / '.join(rate(r['e2e'][c]) for c in counts)} "
            f"| {' / '.join(cpu(r['drain'][c]) for c in counts)} "
            f"| {' / '.join(cpu(r['e2e'][c]) for c in counts)} "
            f"| {percentile(lat, 0.5):.1f} / {percentile(lat, 0.99):.1f} |"
        )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        asyncio.run(PEERS[sys.argv[2]].worker(int(sys.argv[3])))
    else:
        asyncio.run(main())
