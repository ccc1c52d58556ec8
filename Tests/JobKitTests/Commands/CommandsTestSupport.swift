import Foundation
import JobKit

// Fixtures ported from Gummi Commander's specs (FlagAndStringObject, FlagAndStringEvent, the
// Append…/SetFlag/NoSuccess commands, YesGuard/NoGuard), plus a gate for commands that must
// "take time" without the test sleeping.

/// Gummi's `FlagAndStringObject`: `flag` starts `false`, `string` starts empty. Thread-safe.
final class FlagAndString: Sendable {
  private let box = Locked<(flag: Bool, string: String)>((false, ""))

  var flag: Bool { box.value.flag }
  var string: String { box.value.string }

  func append(_ text: String) { box.mutate { $0.string += text } }
  func setFlag() { box.mutate { $0.flag = true } }
  func set(flag: Bool, string: String) { box.mutate { $0 = (flag, string) } }
}

/// Gummi's `FlagAndStringEvent`: carries a fresh ``FlagAndString``.
struct FlagAndStringEvent: Sendable {
  let object = FlagAndString()
}

/// Another event type, for "exact type" checks and nested dispatches.
struct OtherEvent: Sendable {
  let object: FlagAndString

  init(_ object: FlagAndString = FlagAndString()) {
    self.object = object
  }
}

/// Class events, to check that a subclass does not match its superclass's mappings.
class BaseEvent: @unchecked Sendable {
  // @unchecked Sendable: immutable.
  let object = FlagAndString()
}

final class DerivedEvent: BaseEvent, @unchecked Sendable {
  // @unchecked Sendable: immutable, like its superclass.
}

/// Gummi's sync commands: `Append1Command` is `AppendCommand("1", to: object)`.
final class AppendCommand: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: immutable after init.
  let text: String
  let object: FlagAndString

  init(_ text: String, to object: FlagAndString) {
    self.text = text
    self.object = object
    super.init()
  }

  override func operationStart() {
    object.append(text)
    operationDone()
  }
}

/// Gummi's `SetFlagCommand`.
final class SetFlagCommand: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: immutable after init.
  let object: FlagAndString

  init(_ object: FlagAndString) {
    self.object = object
    super.init()
  }

  override func operationStart() {
    object.setFlag()
    operationDone()
  }
}

/// Gummi's async commands: after `delay` (the command's own work, not a test wait) appends
/// `text`, then finishes with `failure`. `Append1AsyncCommand` is ("1_async", 0.02 s) and
/// `Append2AsyncCommand` ("2_async", 0.01 s): the shorter one mapped second still appends
/// second, so the order comes from the group, not from timing. `NoSuccessCommand` is ("error",
/// 0.01 s, failure).
final class DelayedAppendCommand: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: immutable after init.
  let text: String
  let delay: Double
  let object: FlagAndString
  let failure: (any Error)?

  init(_ text: String, after delay: Double, to object: FlagAndString, failure: (any Error)? = nil) {
    self.text = text
    self.delay = delay
    self.object = object
    self.failure = failure
    super.init()
  }

  static func append1Async(_ object: FlagAndString) -> DelayedAppendCommand {
    DelayedAppendCommand("1_async", after: 0.02, to: object)
  }

  static func append2Async(_ object: FlagAndString) -> DelayedAppendCommand {
    DelayedAppendCommand("2_async", after: 0.01, to: object)
  }

  static func noSuccess(_ object: FlagAndString) -> DelayedAppendCommand {
    DelayedAppendCommand("error", after: 0.01, to: object, failure: TestError(7))
  }

  override func operationStart() {
    DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [self] in
      object.append(text)
      operationDone(error: failure)
    }
  }
}

/// A gate a test opens explicitly; closures registered with `whenOpen` run once it is open
/// (at once if it already is). Lets a command "take time" until the test says so, without
/// blocking a thread.
final class Gate: Sendable {
  private let box = Locked<(open: Bool, waiting: [@Sendable () -> Void])>((false, []))

  func whenOpen(_ body: @escaping @Sendable () -> Void) {
    let runNow = box.mutate { state -> Bool in
      if state.open { return true }
      state.waiting.append(body)
      return false
    }
    if runNow { body() }
  }

  func open() {
    let waiting = box.mutate { state -> [@Sendable () -> Void] in
      state.open = true
      defer { state.waiting = [] }
      return state.waiting
    }
    for body in waiting { body() }
  }
}

/// A command that appends `text` and finishes once `gate` opens; records its start and finish
/// in `log` when given one.
final class GatedCommand: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: immutable after init.
  let text: String
  let gate: Gate
  let object: FlagAndString
  let log: EventLog?

  init(_ text: String, gate: Gate, object: FlagAndString, log: EventLog? = nil) {
    self.text = text
    self.gate = gate
    self.object = object
    self.log = log
    super.init()
  }

  override func operationStart() {
    log?.record("start \(text)")
    gate.whenOpen { [self] in
      object.append(text)
      log?.record("finish \(text)")
      operationDone()
    }
  }
}

/// A command that runs a closure when it starts and finishes right after, with `failure`.
final class ClosureCommand: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: immutable after init.
  let body: @Sendable () -> Void
  let failure: (any Error)?

  init(failure: (any Error)? = nil, _ body: @escaping @Sendable () -> Void = {}) {
    self.body = body
    self.failure = failure
    super.init()
  }

  override func operationStart() {
    body()
    operationDone(error: failure)
  }
}

/// Gummi's sequence commands, built from ``SequentialGroup``.
enum Sequences {
  /// `Append12AndSetFlagSequenceCommand`: "12" and the flag, all sync.
  static func append12AndSetFlag(_ object: FlagAndString) -> SequentialGroup {
    SequentialGroup([AppendCommand("1", to: object), AppendCommand("2", to: object), SetFlagCommand(object)])
  }

  /// `Append12Async3AndSetFlagAsyncSequenceCommand`: "1_async2_async3" and the flag.
  static func append12Async3AndSetFlag(_ object: FlagAndString) -> SequentialGroup {
    SequentialGroup([
      DelayedAppendCommand.append1Async(object),
      DelayedAppendCommand.append2Async(object),
      AppendCommand("3", to: object),
      SetFlagCommand(object),
    ])
  }

  /// `DoubleSequenceCommand`: a sequence, "2_async", the same sequence again.
  static func double(_ object: FlagAndString) -> SequentialGroup {
    SequentialGroup([
      append12Async3AndSetFlag(object),
      DelayedAppendCommand.append2Async(object),
      append12Async3AndSetFlag(object),
    ])
  }
}

/// Gummi's `NoSuccessSequenceCommand`: a sequence that stops at the first failure
/// ([NoSuccess, Append1Async]) and appends "NoSuccess" when it ends, whatever the outcome, then
/// finishes with the sequence's error.
final class NoSuccessSequence: JobController, @unchecked Sendable {
  // @unchecked Sendable: immutable after init.
  let object: FlagAndString

  init(_ object: FlagAndString) {
    self.object = object
    super.init()
  }

  override func main() {
    let sequence = SequentialGroup([DelayedAppendCommand.noSuccess(object), DelayedAppendCommand.append1Async(object)])
    sequence.stopsOnFailure = true
    trackAndQueue(sequence) { [unowned self] sequence in
      object.append("NoSuccess")
      if let error = sequence.error { fail(error) }
    }
  }
}

/// Gummi's guards.
enum Guards {
  static let yes: @Sendable (FlagAndStringEvent) -> Bool = { _ in true }
  static let no: @Sendable (FlagAndStringEvent) -> Bool = { _ in false }
}

/// An extension for the tests: maps what `configure` is given, counts `didUnload` calls.
final class TestExtension: CommandExtension {
  let configureBody: @Sendable (CommandExtensionMapper) -> Void
  private let unloads = Locked(0)
  private let mapper = Locked<CommandExtensionMapper?>(nil)

  init(_ configure: @escaping @Sendable (CommandExtensionMapper) -> Void) {
    configureBody = configure
  }

  var didUnloadCount: Int { unloads.value }
  /// The mapper `configure` was given last.
  var lastMapper: CommandExtensionMapper? { mapper.value }

  func configure(_ mapper: CommandExtensionMapper) {
    self.mapper.mutate { $0 = mapper }
    configureBody(mapper)
  }

  func didUnload() { unloads.mutate { $0 += 1 } }
}

extension OperationQueue {
  /// A serial queue.
  static func serial() -> OperationQueue {
    let queue = OperationQueue()
    queue.maxConcurrentOperationCount = 1
    return queue
  }
}

/// A command that dispatches an event when it starts and finishes once that dispatch's job
/// finished, awaiting it (no thread blocks).
final class AwaitingDispatchCommand: ConcurrentOperation, @unchecked Sendable {
  // @unchecked Sendable: immutable after init.
  let dispatch: @Sendable () -> CommandDispatch

  init(_ dispatch: @escaping @Sendable () -> CommandDispatch) {
    self.dispatch = dispatch
    super.init()
  }

  override func operationStart() {
    let job = dispatch()
    Task {
      do {
        try await job.waitForFinish()
        operationDone()
      } catch {
        operationDone(error: error)
      }
    }
  }
}

extension Locked {
  /// Stores `newValue` and returns the value it replaced.
  func exchange(_ newValue: Value) -> Value {
    mutate { value in
      let old = value
      value = newValue
      return old
    }
  }
}
