import Foundation
import Testing

@_spi(JobScope) @testable import JobKit

/// A job's scope: taken when the job is made, handed down to the jobs and tasks it tracks.
@Suite struct JobScopeTests {
  final class Scope: JobScope {}

  /// A task that records the scope it was handed.
  final class Inheriting: ConcurrentOperation, JobScopeInheriting, @unchecked Sendable {
    // @unchecked Sendable: `inherited` is written before the task is queued, read after it finished.
    var inherited: (any JobScope)?
    func inheritScope(_ scope: any JobScope) { inherited = scope }
    override func operationStart() { operationDone() }
  }

  /// Tracks `task` and a nested job that tracks `deep` from a callback of its own.
  final class Parent: JobController, @unchecked Sendable {
    // @unchecked Sendable: immutable after init.
    let task: Inheriting
    let nested: Nested
    init(task: Inheriting, nested: Nested) {
      self.task = task
      self.nested = nested
      super.init()
    }
    override func main() {
      trackAndQueue(task)
      trackAndQueue(nested)
    }
  }

  final class Nested: JobController, @unchecked Sendable {
    // @unchecked Sendable: immutable after init.
    let deep: Inheriting
    init(deep: Inheriting) {
      self.deep = deep
      super.init()
    }
    override func main() {
      trackAndQueue(Work { 1 }) { [self] _ in trackAndQueue(deep) }
    }
  }

  @Test func aScopeReachesEveryTaskOfTheJobMadeInIt() async throws {
    let scope = Scope()
    let task = Inheriting()
    let deep = Inheriting()
    // Made outside the scope, on no job: they take it from the job that tracks them.
    let nested = Nested(deep: deep)
    try await JobController.withScope(scope) {
      let parent = Parent(task: task, nested: nested)
      #expect(parent.scope === scope)
      try await parent.run()
    }
    #expect(task.inherited === scope)
    #expect(nested.scope === scope)
    #expect(deep.inherited === scope)
  }

  @Test func aJobMadeOutsideAnyScopeHandsNothingDown() async throws {
    let task = Inheriting()
    let deep = Inheriting()
    let parent = Parent(task: task, nested: Nested(deep: deep))
    try await parent.run()
    #expect(parent.scope == nil)
    #expect(task.inherited == nil)
    #expect(deep.inherited == nil)
  }
}
