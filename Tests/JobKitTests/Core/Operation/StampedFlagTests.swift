import Testing

@testable import JobKit

@Suite("StampedFlag: an owner's changes, followed in order")
struct StampedFlagTests {
  @Test("each change of the owner gets the next generation")
  func ownerChanges() {
    var owner = StampedFlag()
    #expect(owner.isSet == false)
    #expect(owner.generation == 0)
    let first = owner.change(to: true)
    #expect(first == 1)
    #expect(owner.isSet)
    let second = owner.change(to: false)
    #expect(second == 2)
    #expect(owner.isSet == false)
  }

  @Test("a follower keeps the latest change when changes arrive out of order")
  func followerDropsStaleChanges() {
    var owner = StampedFlag()
    let pause = owner.change(to: true)
    let goOn = owner.change(to: false)
    var follower = StampedFlag()
    let appliedLatest = follower.follow(false, generation: goOn)
    #expect(appliedLatest)
    let appliedStale = follower.follow(true, generation: pause)
    #expect(appliedStale == false)
    #expect(follower.isSet == false)
    #expect(follower.generation == goOn)
  }

  @Test("a follower applies a change once; the initial state is generation 0")
  func followerAppliesOnce() {
    var follower = StampedFlag()
    let initial = follower.follow(true, generation: 0)
    #expect(initial == false)
    let first = follower.follow(true, generation: 1)
    #expect(first)
    let again = follower.follow(true, generation: 1)
    #expect(again == false)
    #expect(follower.isSet)
  }

  @Test("a quiet clear changes the value, not the generation")
  func quietClear() {
    var owner = StampedFlag()
    _ = owner.change(to: true)
    owner.clearQuietly()
    #expect(owner.isSet == false)
    #expect(owner.generation == 1)
    let next = owner.change(to: true)
    #expect(next == 2)
  }
}
