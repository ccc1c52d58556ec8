extension GroupState {
  /// The source of a group made with `init(taking:)`: at most `maxRunning` of its tasks are
  /// pulled and not routed yet. A sequential group's `maxRunning` is 1, and its added tasks wait
  /// until the source is exhausted.
  struct SourceSlots {
    let maxRunning: Int
    /// Tasks reserved or pulled, and not routed yet.
    var running = 0
    /// The source returned `nil`: nothing more is pulled.
    var isExhausted = false
  }
}
