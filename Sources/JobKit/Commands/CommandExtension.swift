import Foundation

/// A group of related mappings that is loaded into a ``CommandMap`` and later unloaded
/// together, for example the commands of one phase of an app.
///
/// ```swift
/// final class GameExtension: CommandExtension {
///     let scoreboard: Scoreboard
///     init(scoreboard: Scoreboard) { self.scoreboard = scoreboard }
///     func configure(_ mapper: CommandExtensionMapper) {
///         mapper.map(Scored.self) { [scoreboard] event in AddPoints(event.points, to: scoreboard) }
///     }
///     func didUnload() { scoreboard.close() }
/// }
/// let game = GameExtension(scoreboard: board)
/// map.load(game)    // calls configure
/// map.unload(game)  // removes exactly the mappings configure made, then calls didUnload
/// ```
///
/// An extension is identified by its instance: an instance is loaded into a map at most once at
/// a time, and the map keeps it alive until it is unloaded.
public protocol CommandExtension: AnyObject, Sendable {
  /// Makes the extension's mappings through `mapper`.
  ///
  /// Called once per ``CommandMap/load(_:)``, on the thread that called it, with no lock held.
  /// Mappings made through `mapper` belong to the extension until it is unloaded; `mapper` can be
  /// kept and used later while the extension stays loaded.
  func configure(_ mapper: CommandExtensionMapper)

  /// The extension's own clean-up: close services, release resources.
  ///
  /// Called once per ``CommandMap/unload(_:)`` that unloaded the extension, on the thread that
  /// called it, after the extension's mappings were removed. Dispatches that began before the
  /// unload may still run commands of the extension. The default implementation does nothing.
  func didUnload()
}

extension CommandExtension {
  /// Does nothing.
  public func didUnload() {}
}
