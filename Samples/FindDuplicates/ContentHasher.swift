import Foundation

/// A fast, non-cryptographic 64-bit hash of a byte stream, fed in pieces of any size.
///
/// It is a single-lane variant of xxHash64: each little-endian 64-bit word is mixed in with a
/// multiply-rotate-multiply round, and the result gets the length and a final avalanche. It is
/// only used to put files into buckets of likely duplicates (equality is then confirmed byte by
/// byte), so a collision costs time, never a wrong answer.
struct ContentHasher {
  private static let prime1: UInt64 = 0x9E37_79B1_85EB_CA87
  private static let prime2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
  private static let prime3: UInt64 = 0x1656_67B1_9E37_79F9

  private var accumulator = ContentHasher.prime3
  /// Bytes that do not yet make a whole word, in the low bytes, little-endian.
  private var pending: UInt64 = 0
  private var pendingCount = 0
  private var length: UInt64 = 0

  /// Feeds the bytes of `data`.
  mutating func combine(_ data: Data) {
    data.withUnsafeBytes { combine($0) }
  }

  /// Feeds `bytes`.
  mutating func combine(_ bytes: UnsafeRawBufferPointer) {
    length &+= UInt64(bytes.count)
    var offset = 0
    // Complete a word left over from the previous piece.
    while pendingCount != 0, offset < bytes.count {
      appendPending(bytes[offset])
      offset += 1
    }
    while offset + 8 <= bytes.count {
      let word = bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
      accumulator = Self.round(accumulator, UInt64(littleEndian: word))
      offset += 8
    }
    while offset < bytes.count {
      appendPending(bytes[offset])
      offset += 1
    }
  }

  /// The hash of all bytes fed so far.
  func finalize() -> UInt64 {
    var hash = accumulator
    if pendingCount != 0 {
      // Zero-padded; the length below tells such a tail from real zero bytes.
      hash = Self.round(hash, pending)
    }
    hash ^= length &* Self.prime1
    hash ^= hash &>> 33
    hash &*= Self.prime2
    hash ^= hash &>> 29
    hash &*= Self.prime3
    hash ^= hash &>> 32
    return hash
  }

  private mutating func appendPending(_ byte: UInt8) {
    pending |= UInt64(byte) &<< (8 * pendingCount)
    pendingCount += 1
    if pendingCount == 8 {
      accumulator = Self.round(accumulator, pending)
      pending = 0
      pendingCount = 0
    }
  }

  private static func round(_ accumulator: UInt64, _ word: UInt64) -> UInt64 {
    let mixed = accumulator &+ word &* prime2
    return ((mixed &<< 31) | (mixed &>> 33)) &* prime1
  }
}
