/// A deterministic random number generator (SplitMix64) for stress and crash tests: the same
/// seed gives the same choices, so a failing run is repeated from the seed it printed.
///
/// ```swift
/// var random = SeededGenerator(seed: seed)
/// let width = Int.random(in: 1...8, using: &random)
/// ```
public struct SeededGenerator: RandomNumberGenerator, Sendable {
  private var state: UInt64

  /// A generator whose sequence is fixed by `seed` (any value, zero included).
  public init(seed: UInt64) {
    state = seed
  }

  /// The next value of the sequence.
  public mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var value = state
    value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
    value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
    return value ^ (value >> 31)
  }
}
