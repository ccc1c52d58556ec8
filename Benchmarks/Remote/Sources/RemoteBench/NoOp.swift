import JobKitPostgres

/// The benchmark's remote task kind: the handler returns its input, so what is measured is the
/// queue (insert, claim, complete, notify), not work.
enum NoOp: RemoteTaskKind {
  typealias Input = Int
  typealias Output = Int
  static let name = "remote-bench.no-op"
}
