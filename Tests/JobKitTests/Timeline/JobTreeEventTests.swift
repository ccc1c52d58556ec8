import Foundation
import JobKitTesting
import Testing

@testable import JobKit

@Suite("JobController.treeEvents")
struct JobTreeEventTests {
  @Test func aJobAndTheJobsItNestsDeliverTheirEventsInOneSequenceThatEndsWithTheLast() async throws {
    let inner = ConcurrentGroup([named(InstantTask(), "c1"), named(InstantTask(), "c2")])
    let outer = SequentialGroup([inner, named(InstantTask(), "s1")])
    let job = ScriptedJob { job in job.trackAndQueue(outer) }
    let events = job.treeEvents
    job.startJob()
    let received = Locked<[JobTreeEvent]>([])
    let ended = Latch()
    Task {
      for await event in events { received.mutate { $0.append(event) } }
      ended.open()
    }
    #expect(await ended.waitOpen())
    let all = received.value
    let jobs = Set(all.map(\.job)).sorted { $0.id < $1.id }
    #expect(jobs.map(\.id) == [0, 1, 2])
    #expect(jobs.map(\.parent) == [nil, 0, 1])
    #expect(jobs.map(\.type) == ["ScriptedJob", "SequentialGroup", "ConcurrentGroup"])
    for job in jobs {
      // Each job's events, in their order, from its start to its finish.
      let labels = all.filter { $0.job == job }.map(\.event.label)
      #expect(labels.first == "started")
      #expect(labels.last == "finished")
    }
    #expect(
      all.filter { $0.job.id == 2 }.map(\.event.label).filter { $0.hasPrefix("finished ") }.sorted() == [
        "finished c1", "finished c2",
      ])
  }

  @Test func aFinishedJobsTreeEventsEndAtOnce() async throws {
    let job = ScriptedJob { _ in }
    try await job.run()
    var count = 0
    for await _ in job.treeEvents { count += 1 }
    #expect(count == 0)
  }
}
