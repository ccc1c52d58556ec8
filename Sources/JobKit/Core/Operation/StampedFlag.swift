/// A flag that one side changes and other sides follow, each under its own lock: every change
/// gets the next generation, so a follower that receives changes out of order (each is handed
/// over after its lock) keeps the latest and drops a stale one. An operation's suspension and a
/// command queue's pause are changed this way; a job's suspension and its admission's pause
/// follow them.
struct StampedFlag {
  /// The flag's value.
  private(set) var isSet = false
  /// The generation of the last change made (owner) or applied (follower); 0 before any.
  private(set) var generation: UInt64 = 0

  /// The owner changes the flag. Returns the change's generation, to hand to the followers.
  mutating func change(to value: Bool) -> UInt64 {
    isSet = value
    generation += 1
    return generation
  }

  /// The owner clears the flag for a reason the followers learn another way (a cancel or a
  /// finish ends an operation's suspension): no new generation.
  mutating func clearQuietly() {
    isSet = false
  }

  /// A follower applies change number `generation`. Returns `false`, changing nothing, when
  /// that change or a later one was applied already.
  mutating func follow(_ value: Bool, generation: UInt64) -> Bool {
    guard generation > self.generation else { return false }
    self.generation = generation
    isSet = value
    return true
  }
}
