/// xxHash64 (Yann Collet's XXH64, seed 0 by default), fed in pieces of any size.
///
/// A fast non-cryptographic 64-bit hash: four independent lanes over 32-byte stripes, so it
/// runs at memory speed. `find-duplicates` only uses it to put files into buckets of likely
/// duplicates; equality is then confirmed byte by byte, so a collision costs time, never a wrong
/// answer. The output matches the reference XXH64 (checked against its test vectors).
public struct XXHash64: Sendable {
  private static let prime1: UInt64 = 0x9E37_79B1_85EB_CA87
  private static let prime2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
  private static let prime3: UInt64 = 0x1656_67B1_9E37_79F9
  private static let prime4: UInt64 = 0x85EB_CA77_C2B2_AE63
  private static let prime5: UInt64 = 0x27D4_EB2F_1656_67C5

  private let seed: UInt64
  private var lane1: UInt64
  private var lane2: UInt64
  private var lane3: UInt64
  private var lane4: UInt64
  /// Up to 31 bytes that do not yet make a whole stripe.
  private var tail: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
  private var tailCount = 0
  private var length: UInt64 = 0

  /// A hasher with nothing fed yet.
  public init(seed: UInt64 = 0) {
    self.seed = seed
    lane1 = seed &+ Self.prime1 &+ Self.prime2
    lane2 = seed &+ Self.prime2
    lane3 = seed
    lane4 = seed &- Self.prime1
  }

  /// The hash of `bytes` in one call.
  public static func hash(_ bytes: UnsafeRawBufferPointer, seed: UInt64 = 0) -> UInt64 {
    var hasher = XXHash64(seed: seed)
    hasher.update(bytes)
    return hasher.finalize()
  }

  /// The hash of `bytes` in one call.
  public static func hash(_ bytes: [UInt8], seed: UInt64 = 0) -> UInt64 {
    bytes.withUnsafeBytes { hash($0, seed: seed) }
  }

  /// Feeds `bytes`.
  public mutating func update(_ bytes: UnsafeRawBufferPointer) {
    guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
    length &+= UInt64(bytes.count)
    var offset = 0
    if tailCount > 0 {
      let take = min(32 - tailCount, bytes.count)
      withUnsafeMutableBytes(of: &tail) { tailBytes in
        tailBytes.baseAddress!.advanced(by: tailCount).copyMemory(from: base, byteCount: take)
      }
      tailCount += take
      offset = take
      guard tailCount == 32 else { return }
      let stripe = tail
      consume(stripe.0, stripe.1, stripe.2, stripe.3)
      tailCount = 0
    }
    var v1 = lane1
    var v2 = lane2
    var v3 = lane3
    var v4 = lane4
    while offset + 32 <= bytes.count {
      v1 = Self.round(v1, UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
      v2 = Self.round(v2, UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)))
      v3 = Self.round(v3, UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 16, as: UInt64.self)))
      v4 = Self.round(v4, UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 24, as: UInt64.self)))
      offset += 32
    }
    lane1 = v1
    lane2 = v2
    lane3 = v3
    lane4 = v4
    if offset < bytes.count {
      let rest = bytes.count - offset
      withUnsafeMutableBytes(of: &tail) { tailBytes in
        tailBytes.baseAddress!.copyMemory(from: base.advanced(by: offset), byteCount: rest)
      }
      tailCount = rest
    }
  }

  /// The hash of everything fed so far.
  public func finalize() -> UInt64 {
    var hash: UInt64
    if length >= 32 {
      hash = Self.rotate(lane1, 1) &+ Self.rotate(lane2, 7) &+ Self.rotate(lane3, 12) &+ Self.rotate(lane4, 18)
      hash = Self.merge(hash, lane1)
      hash = Self.merge(hash, lane2)
      hash = Self.merge(hash, lane3)
      hash = Self.merge(hash, lane4)
    } else {
      hash = seed &+ Self.prime5
    }
    hash &+= length
    var tail = self.tail
    let count = tailCount
    withUnsafeBytes(of: &tail) { bytes in
      var offset = 0
      while offset + 8 <= count {
        let word = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
        hash ^= Self.round(0, word)
        hash = Self.rotate(hash, 27) &* Self.prime1 &+ Self.prime4
        offset += 8
      }
      if offset + 4 <= count {
        let word = UInt64(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
        hash ^= word &* Self.prime1
        hash = Self.rotate(hash, 23) &* Self.prime2 &+ Self.prime3
        offset += 4
      }
      while offset < count {
        hash ^= UInt64(bytes[offset]) &* Self.prime5
        hash = Self.rotate(hash, 11) &* Self.prime1
        offset += 1
      }
    }
    hash ^= hash &>> 33
    hash &*= Self.prime2
    hash ^= hash &>> 29
    hash &*= Self.prime3
    hash ^= hash &>> 32
    return hash
  }

  private mutating func consume(_ word1: UInt64, _ word2: UInt64, _ word3: UInt64, _ word4: UInt64) {
    lane1 = Self.round(lane1, UInt64(littleEndian: word1))
    lane2 = Self.round(lane2, UInt64(littleEndian: word2))
    lane3 = Self.round(lane3, UInt64(littleEndian: word3))
    lane4 = Self.round(lane4, UInt64(littleEndian: word4))
  }

  @inline(__always)
  private static func rotate(_ value: UInt64, _ count: UInt64) -> UInt64 {
    (value &<< count) | (value &>> (64 &- count))
  }

  @inline(__always)
  private static func round(_ accumulator: UInt64, _ input: UInt64) -> UInt64 {
    rotate(accumulator &+ input &* prime2, 31) &* prime1
  }

  @inline(__always)
  private static func merge(_ accumulator: UInt64, _ lane: UInt64) -> UInt64 {
    (accumulator ^ round(0, lane)) &* prime1 &+ prime4
  }
}
