import FindDuplicatesCore
import Foundation
import JobKit
import Testing

/// A cancel (what Ctrl-C does) stops a search promptly in every reading phase, and no next step
/// is set up after it. The files are sparse: gigabytes that would take many seconds to read,
/// and take no disk space. One reader, one test at a time: the reading keeps its threads busy,
/// and the other suites of the process need a core too.
@Suite(.serialized, .timeLimit(.minutes(1))) struct CancellationTests {
  /// Generous: the tool aims at 100 ms; a loaded machine must not fail the test (under
  /// ThreadSanitizer on a busy 2-core machine a prompt cancel took 2.5 and 3.5 s to be seen
  /// here). The sparse files are large enough that reading them instead of stopping takes far
  /// longer than this bound.
  static let bound = Duration.seconds(10)

  private func cancelWhenStarted(
    _ group: String, roots: [[UInt8]]
  ) async throws -> (elapsed: Duration, job: FindDuplicatesJob) {
    var configuration = FindDuplicatesJob.Configuration(roots: roots)
    configuration.readers = 1
    let job = FindDuplicatesJob(configuration: configuration)
    let events = job.events
    job.startJob()
    for await event in events {
      if case .taskStarted(_, let started, _) = event, started.hasSuffix(group) { break }
    }
    let cancelled = ContinuousClock.now
    job.cancel()
    await #expect(throws: CancellationError.self) { try await job.run() }
    return (.now - cancelled, job)
  }

  @Test func cancelWhileComparing() async throws {
    let directory = TemporaryDirectory()
    directory.sparse("a", size: 256 << 30)
    directory.sparse("b", size: 256 << 30)
    let (elapsed, job) = try await cancelWhenStarted("CompareRanges", roots: [directory.path])
    #expect(elapsed < Self.bound)
    #expect(job.report == nil)
  }

  @Test func cancelWhileHashingSetsUpNoComparison() async throws {
    let directory = TemporaryDirectory()
    for name in ["a", "b", "c"] { directory.sparse(name, size: 256 << 30) }
    let (elapsed, job) = try await cancelWhenStarted("HashRanges", roots: [directory.path])
    #expect(elapsed < Self.bound)
    #expect(job.report == nil)
    #expect(job.status.current.phase == .hashing)
  }

  /// Cancelled from the hook that runs after the first directory was read (not from the
  /// `taskStarted` event: under load, events arrive after a small scan has ended).
  @Test func cancelWhileScanningSetsUpNoHashing() async throws {
    let directory = TemporaryDirectory()
    for index in 0..<2000 { directory.write("d\(index % 50)/f\(index)", "same") }
    var configuration = FindDuplicatesJob.Configuration(roots: [directory.path])
    configuration.readers = 1
    let job = JobBox()
    configuration.hooks.afterScanningDirectory = { _ in job.get()?.cancel() }
    let search = FindDuplicatesJob(configuration: configuration)
    job.set(search)
    await #expect(throws: CancellationError.self) { try await search.run() }
    job.set(nil)
    #expect(search.report == nil)
    #expect(search.status.current.phase == .scanning)
  }

}

/// The job a hook cancels, set after the job was made.
private final class JobBox: @unchecked Sendable {
  // @unchecked Sendable: `job` is only touched under `lock`.
  private let lock = NSLock()
  private var job: FindDuplicatesJob?

  func set(_ new: FindDuplicatesJob?) { lock.withLock { job = new } }
  func get() -> FindDuplicatesJob? { lock.withLock { job } }
}
