import Foundation

/// An operation's identity as a key of JobKit's private tables (the completion-block hooks, a
/// group's members), hashed by one multiplication and a fold of its high half. The tables are internal and their keys are
/// heap addresses, so SipHash's protection against chosen keys buys nothing there, and its
/// cost per insertion and removal is a large share of a task's.
///
/// A key says nothing about whether its operation is alive; a table must drop it before the
/// operation can be freed (its address could be reused), or tell a stale entry from a live one
/// (the hook registry keeps fired hooks, which an operation at the same address replaces).
struct OperationKey: Hashable {
  let address: UInt

  init(_ operation: Operation) {
    address = UInt(bitPattern: ObjectIdentifier(operation))
  }

  func hash(into hasher: inout Hasher) {
    hasher.combine(address)
  }

  // swift-format-ignore: AlwaysUseLowerCamelCase
  func _rawHashValue(seed: Int) -> Int {
    // A table picks a bucket from the hash's low bits, which a product takes from the factors'
    // low bits only: the high half is folded in, or the keys of one hook stripe (which share the
    // address bits that chose the stripe) would all fall into 1/64 of the buckets.
    let product = (address &>> 4) &* 0x9E37_79B9_7F4A_7C15
    return Int(bitPattern: product ^ (product &>> 32) ^ UInt(bitPattern: seed))
  }
}
