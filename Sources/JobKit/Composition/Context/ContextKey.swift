/// A typed key for a value in a ``JobContext``.
///
/// The key's `Value` type is the type of the value stored under it, so the compiler checks every
/// read and write. Declare keys once, as static constants:
///
/// ```swift
/// extension ContextKey where Value == String {
///     static let userName = ContextKey("userName")
/// }
/// context[.userName] = "ada"          // only a String compiles here
/// let name: String? = context[.userName]
/// ```
///
/// Two keys are the same key when their names and their `Value` types are equal: `ContextKey<Int>("n")`
/// and `ContextKey<String>("n")` name two different entries.
public struct ContextKey<Value: Sendable>: Hashable, Sendable, CustomStringConvertible {
  /// The key's name, for logs and for telling keys of the same type apart.
  public let name: String

  /// Creates a key. Keys with equal names and equal `Value` types refer to the same entry.
  public init(_ name: String) {
    self.name = name
  }

  /// `name: Value`, for example `userName: String`.
  public var description: String { "\(name): \(Value.self)" }

  /// The key as stored by ``JobContext``: its name and its value type.
  var storageKey: ContextStorageKey {
    ContextStorageKey(name: name, valueType: ObjectIdentifier(Value.self))
  }
}

/// A ``ContextKey`` with its value type erased, used as the dictionary key inside ``JobContext``.
struct ContextStorageKey: Hashable, Sendable {
  let name: String
  let valueType: ObjectIdentifier
}
