/// The code a ``Work`` reports, declared with it (the core knows nothing of `Work`).
extension JobKitError.Code {
  /// The `complete` handed to a `Work(callback:)` body was called again. The later call is
  /// ignored; the first result stands.
  public static let completedTwice = Self(name: "completedTwice")
}
