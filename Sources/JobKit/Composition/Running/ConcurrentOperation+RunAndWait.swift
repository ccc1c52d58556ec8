import Foundation

extension ConcurrentOperation {
  /// Starts the operation unless it is queued or started already, blocks the calling thread until
  /// it finished, then throws its ``error``, or `CancellationError` if it was cancelled without an
  /// error: for tests and command-line scripts. The blocking twin of `run()` (see
  /// <doc:WorkAndTheCrawl> for the table of both).
  ///
  /// The operation is added to ``JobController/sharedJobQueue`` unless JobKit already queued it
  /// (``JobController/startJob()``, ``JobController/run()``, a job's `trackAndQueue`,
  /// ``Pipeline/finally(_:)``, an earlier `run()` or `runAndWait()`) or it already started; then
  /// it is only waited for, and nothing is reported. JobKit cannot see an operation you added to
  /// a queue yourself, and Foundation treats adding an operation to a second queue as a fatal
  /// error: call `waitUntilFinished()` for those.
  ///
  /// The calling thread blocks until the operation finished. That is safe at the top level of a
  /// script, on a test's own thread, and in a task body on a concurrent queue, but in a task body
  /// it costs a thread: each nested call holds the worker thread it runs on while the inner
  /// operation runs on another. libdispatch on Linux runs about one worker per core at once and
  /// adds one only about once a second while its workers are blocked (idle extra workers exit
  /// after a few seconds), so nesting `runAndWait()` deeper than the number of cores stalls about
  /// one second per extra level while the pool is cold, as plain `BlockOperation`s with
  /// `waitUntilFinished()` do (`Benchmarks/README.md` has the figures). In a task body, prefer
  /// a `BlockTask(async:)` that awaits `run()`: it blocks no thread. It never returns if the
  /// blocked thread is one the operation needs: a serial queue's only thread when the operation
  /// or its tasks run on that queue, or a job's `main()` or callback waiting for that job or one
  /// of its tasks (the job routes on the thread of its callbacks). In async code it is
  /// unavailable (`noasync`): `await` `run()` or ``waitForFinish()`` there.
  @available(*, noasync, message: "blocks the calling thread; use run() or waitForFinish() in async code")
  public func runAndWait() throws {
    queueOnce()
    waitUntilFinished()
    try throwOutcome()
  }
}
