import Foundation
import Testing

@testable import JobKit

@Suite("RateLimit transitions")
struct RateLimitStateTests {
  @Test func theBucketStartsFullAndRefillsOneTokenAtATimeUpToTheBurst() {
    var bucket = RateLimit(tasksPerSecond: 4, burst: 2)
    #expect(bucket.interval == .milliseconds(250))
    #expect(bucket.tokens == 2)
    let fullNeedsNoRefill = bucket.startRefill(waiting: false)
    #expect(!fullNeedsNoRefill)
    bucket.take()
    bucket.take()
    #expect(!bucket.hasToken)
    let first = bucket.startRefill(waiting: false)
    let second = bucket.startRefill(waiting: false)
    #expect(first && !second)  // one timer at a time
    bucket.refill()
    #expect(bucket.tokens == 1)
    let again = bucket.startRefill(waiting: false)
    #expect(again)
    bucket.refill()
    bucket.refill()
    #expect(bucket.tokens == 2)  // capped at the burst
    let full = bucket.startRefill(waiting: false)
    let waitingBehindALimit = bucket.startRefill(waiting: true)
    #expect(!full && waitingBehindALimit)
  }

  @Test func aNewRateKeepsTheTokensLeftAndTheRunningRefill() {
    var old = RateLimit(tasksPerSecond: 1, burst: 5)
    old.take()
    _ = old.startRefill(waiting: false)
    let lower = RateLimit(tasksPerSecond: 10, burst: 2, replacing: old)
    #expect(lower.tokens == 2 && lower.isRefilling)
    let higher = RateLimit(tasksPerSecond: 10, burst: 8, replacing: old)
    #expect(higher.tokens == 4 && higher.interval == .milliseconds(100))
  }
}
