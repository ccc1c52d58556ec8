import JobKitTesting
import Testing

@testable import JobKit

/// `Outbox` fed by hand on one thread: who becomes the drainer, what each batch holds, and that
/// everything appended is taken once, in order.
@Suite("Outbox")
struct OutboxTests {
  typealias Box = Outbox<Int, String>

  @Test func theFirstThreadWithWorkBecomesTheDrainerAndOthersLeaveItTheWork() {
    var box = Box()
    let check1 = box.claim(by: 1, mayRoute: true) == .none  // nothing to do
    #expect(check1)
    box.route(10)
    let check2 = box.claim(by: 1, mayRoute: false) == .none  // a route it may not take
    #expect(check2)
    let check3 = box.claim(by: 1, mayRoute: true) == .drainer
    #expect(check3)
    box.route(11)
    box.yield("e")
    let check4 = box.claim(by: 2, mayRoute: true) == .none  // 1 drains: it takes these too
    #expect(check4)
    #expect(box.drainer == .busy(thread: 1))
  }

  @Test func anExtraStepMakesADrainerWithNothingQueued() {
    var box = Box()
    let check5 = box.claim(by: 3, mayRoute: false, extra: true) == .drainer
    #expect(check5)
  }

  @Test func theDrainersOwnThreadDrainsEventsAndProgressNestedButNeverRoutes() {
    var box = Box()
    box.route(1)
    let check6 = box.claim(by: 1, mayRoute: true) == .drainer
    #expect(check6)
    let first = box.take(mayRoute: true)
    #expect(first.route == 1)
    box.route(2)
    let check7 = box.claim(by: 1, mayRoute: true) == .none  // only a route: the outer loop takes it
    #expect(check7)
    box.yield("tracked")
    box.progressDidChange()
    let check8 = box.claim(by: 1, mayRoute: true) == .nested
    #expect(check8)
    let nested = box.takeNested()
    #expect(nested.events == ["tracked"] && nested.publishProgress && nested.route == nil)
    let next = box.take(mayRoute: true)
    #expect(next.route == 2 && next.events.isEmpty && !next.publishProgress)
    let check9 = box.take(mayRoute: true).isEmpty
    #expect(check9)
    box.release()
    #expect(box.drainer == .idle)
  }

  @Test func batchesKeepTheOrderAndTakeEachItemOnce() {
    var box = Box()
    for i in 0..<5 { box.route(i) }
    box.yield("a")
    box.yield("b")
    let check10 = box.claim(by: 7, mayRoute: true) == .drainer
    #expect(check10)
    var routed: [Int] = []
    var events: [String] = []
    while true {
      let batch = box.take(mayRoute: true)
      if batch.isEmpty { break }
      events += batch.events
      routed += batch.route.map { [$0] } ?? []
      if batch.route == 1 { box.yield("c") }  // appended while draining: taken next
    }
    box.release()
    #expect(routed == [0, 1, 2, 3, 4])
    #expect(events == ["a", "b", "c"])
    #expect(!box.hasRoutes && !box.hasEvents && !box.progressChanged)
  }

  @Test func aDrainerThatMayNotRouteLeavesTheRoutesForLater() {
    var box = Box()
    box.route(1)
    box.yield("started")
    let check11 = box.claim(by: 2, mayRoute: false) == .drainer
    #expect(check11)
    let batch = box.take(mayRoute: false)
    #expect(batch.events == ["started"] && batch.route == nil)
    let check12 = box.take(mayRoute: false).isEmpty
    #expect(check12)
    box.release()
    #expect(box.routeCount == 1)
    let check13 = box.claim(by: 1, mayRoute: true) == .drainer
    #expect(check13)
    let check14 = box.take(mayRoute: true).route == 1
    #expect(check14)
  }

  /// A seeded mix of appends and drains by several "threads" (interleaved by hand): every route
  /// and event comes out exactly once, in order, and only the drainer takes anything.
  @Test(arguments: [1, 2, 3, 42, 1234])
  func randomInterleavingsDeliverEverythingOnceInOrder(seed: UInt64) {
    var generator = SeededGenerator(seed: seed)
    var box = Box()
    var nextRoute = 0
    var nextEvent = 0
    var routed: [Int] = []
    var events: [Int] = []
    var drainer: UInt?
    for _ in 0..<5_000 {
      let thread = UInt.random(in: 1...4, using: &generator)
      switch Int.random(in: 0..<4, using: &generator) {
      case 0:
        box.route(nextRoute)
        nextRoute += 1
      case 1:
        box.yield("\(nextEvent)")
        nextEvent += 1
      default:
        break
      }
      switch box.claim(by: thread, mayRoute: true) {
      case .drainer:
        #expect(drainer == nil)
        drainer = thread
      case .nested:
        #expect(drainer == thread)
        events += box.takeNested().events.compactMap { Int($0) }
      case .none:
        break
      }
      guard let current = drainer, Bool.random(using: &generator) else { continue }
      let batch = box.take(mayRoute: true)
      events += batch.events.compactMap { Int($0) }
      routed += batch.route.map { [$0] } ?? []
      if batch.isEmpty {
        box.release()
        drainer = nil
      }
      _ = current
    }
    if drainer == nil { _ = box.claim(by: 9, mayRoute: true) }
    while case let batch = box.take(mayRoute: true), !batch.isEmpty {
      events += batch.events.compactMap { Int($0) }
      routed += batch.route.map { [$0] } ?? []
    }
    #expect(routed == Array(0..<nextRoute))
    #expect(events == Array(0..<nextEvent))
  }
}
