/// xoshiro256** seeded through SplitMix64: a small, fast generator whose whole sequence follows
/// from one 64-bit seed, so a model-based workflow can be rebuilt from its seed alone.
struct ModelRandom: RandomNumberGenerator {
  private var s0: UInt64
  private var s1: UInt64
  private var s2: UInt64
  private var s3: UInt64

  /// Expands `seed` into the four state words with SplitMix64 (never all zero).
  init(seed: UInt64) {
    var splitMix = seed
    func nextSplitMix() -> UInt64 {
      splitMix &+= 0x9E37_79B9_7F4A_7C15
      var z = splitMix
      z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
      z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
      return z ^ (z >> 31)
    }
    s0 = nextSplitMix()
    s1 = nextSplitMix()
    s2 = nextSplitMix()
    s3 = nextSplitMix()
  }

  mutating func next() -> UInt64 {
    let result = rotateLeft(s1 &* 5, by: 7) &* 9
    let t = s1 << 17
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = rotateLeft(s3, by: 45)
    return result
  }

  /// `true` with probability `probability`.
  mutating func chance(_ probability: Double) -> Bool {
    Double(next() >> 11) / Double(1 << 53) < probability
  }

  /// A uniformly chosen integer in `range`.
  mutating func int(_ range: ClosedRange<Int>) -> Int {
    Int.random(in: range, using: &self)
  }

  /// A uniformly chosen element of a non-empty array.
  mutating func pick<Element>(_ elements: [Element]) -> Element {
    elements[int(0...(elements.count - 1))]
  }

  private func rotateLeft(_ value: UInt64, by amount: UInt64) -> UInt64 {
    (value << amount) | (value >> (64 - amount))
  }
}
