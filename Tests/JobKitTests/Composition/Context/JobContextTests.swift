import Foundation
import Testing

@testable import JobKit

@Suite("JobContext")
struct JobContextTests {
  @Test func storesValuesByTypedKey() {
    let context = JobContext()
    #expect(context[.foo1] == nil)
    context[.foo1] = "bar1"
    context[.counter] = 3
    #expect(context[.foo1] == "bar1")
    #expect(context[.counter] == 3)
    // Same name, other value type: another entry.
    let textCounter = ContextKey<String>("counter")
    #expect(context[textCounter] == nil)
    context[textCounter] = "three"
    #expect(context[.counter] == 3 && context[textCounter] == "three")
    #expect(context.removeValue(forKey: .counter) == 3)
    #expect(context[.counter] == nil)
    context[.foo1] = nil
    #expect(context[.foo1] == nil)
    #expect(ContextKey<Int>("counter") == .counter)
    #expect(ContextKey<Int>.counter.description == "counter: Int")
  }

  /// `update` loses no concurrent write: 8 threads x 1,000 increments.
  @Test func updateLosesNoConcurrentWrite() async {
    let context = JobContext()
    await concurrently(8) { _ in
      for _ in 0..<1_000 {
        context.update(.counter, default: 0) { $0 += 1 }
      }
    }
    #expect(context[.counter] == 8_000)
    let returned = context.update(.counter, default: 0) { value -> Int in
      value += 1
      return value * 2
    }
    #expect(returned == 16_002)
  }

  /// MGCommandGroupSpec / MGSequentialCommandGroupSpec "with userInfo": the group injects its
  /// context into every command, which writes into it.
  @Test(arguments: GroupKind.allCases)
  func commandsWriteIntoTheGroupsContext(kind: GroupKind) async throws {
    let group = kind.make([
      ContextProbe { $0[.foo1] = "bar1" },
      ContextProbe { $0[.foo2] = "bar2" },
    ])
    try await group.run()
    #expect(group.context[.foo1] == "bar1")
    #expect(group.context[.foo2] == "bar2")
  }

  /// MGCommand README: nested commands and groups all get the same instance.
  @Test func everyTaskAndNestedGroupSharesOneInstance() async throws {
    let probes = (0..<4).map { _ in ContextProbe() }
    let currentSeen = Locked<[JobContext?]>([])
    let innermost = SequentialGroup([probes[2], BlockTask { currentSeen.mutate { $0.append(JobContext.current) } }])
    let middle = ConcurrentGroup([probes[1], innermost])
    let outer = SequentialGroup([
      probes[0], middle, probes[3],
      BlockTask(async: {
        let fromChild = await Task { JobContext.current }.value
        currentSeen.mutate { $0.append(fromChild) }
      }),
    ])
    try await outer.run()
    #expect(probes.allSatisfy { $0.seen === outer.context })
    #expect(middle.context === outer.context && innermost.context === outer.context)
    #expect(currentSeen.value.count == 2 && currentSeen.value.allSatisfy { $0 === outer.context })
  }

  /// Values set on a nested group before it was nested are kept; the parent's win on conflict.
  @Test func aNestedGroupKeepsItsOwnValuesWhenItAdoptsTheParentsContext() async throws {
    let inner = ConcurrentGroup([ContextProbe()])
    inner.context[.foo1] = "inner"
    inner.context[.foo2] = "inner"
    let outer = SequentialGroup([inner])
    outer.context[.foo2] = "outer"
    try await outer.run()
    #expect(inner.context === outer.context)
    #expect(outer.context[.foo1] == "inner" && outer.context[.foo2] == "outer")
  }

  @Test func aBlockTaskReachesItsContextAsArgumentAndAsCurrent() async throws {
    let group = SequentialGroup([
      BlockTask { context in context[.text] = "argument" },
      BlockTask { JobContext.current?.update(.text, default: "") { $0 += "+current" } },
      BlockTask(async: { context in
        await Task.yield()
        context.update(.text, default: "") { $0 += "+async" }
      }),
    ])
    try await group.run()
    #expect(group.context[.text] == "argument+current+async")
    #expect(JobContext.current == nil)
  }

  @Test func aBlockTaskOutsideAGroupGetsAFreshContext() async throws {
    let task = BlockTask { $0[.counter] = 1 }
    #expect(task.context == nil)
    await onThread { try? task.runAndWait() }
    #expect(task.context?[.counter] == 1)
  }
}
