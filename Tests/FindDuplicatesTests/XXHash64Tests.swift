import FindDuplicatesCore
import Testing

@Suite struct XXHash64Tests {
  /// Reference values of XXH64 with seed 0.
  @Test(arguments: [
    ("", 0xEF46_DB37_51D8_E999 as UInt64),
    ("a", 0xD24E_C4F1_A98C_6E5B),
    ("abc", 0x44BC_2CF5_AD77_0999),
    ("Nobody inspects the spammish repetition", 0xFBCE_A83C_8A37_8BF1),
  ])
  func matchesReference(text: String, expected: UInt64) {
    #expect(XXHash64.hash(Array(text.utf8)) == expected)
  }

  @Test func piecesHashLikeTheWhole() {
    var generator = SystemRandomNumberGenerator()
    let bytes = (0..<1000).map { _ in UInt8.random(in: 0...255, using: &generator) }
    let whole = XXHash64.hash(bytes)
    for split in [1, 7, 31, 32, 33, 64, 999] {
      var hasher = XXHash64()
      var start = 0
      while start < bytes.count {
        let end = min(bytes.count, start + split)
        bytes[start..<end].withUnsafeBytes { hasher.update($0) }
        start = end
      }
      #expect(hasher.finalize() == whole, "pieces of \(split)")
    }
  }
}
