import Foundation
import JobKitTesting
import Testing

@testable import JobKit

/// How a case's job treats the queue it made for itself.
enum QueueRoute: String, CaseIterable, Sendable {
  /// Nobody reads `taskQueue`: the job starts its own operations itself.
  case privateQueue
  /// `taskQueue` is read before the job starts: every task goes through `addOperation`.
  case handedOut
}

/// The order of five tasks on a serial queue, by corelibs case: their priorities, and the order
/// (by index) a queue of one operation at a time runs them in.
enum SerialOrderCase: String, CaseIterable, Sendable {
  case operationOrder, operationOrder2, operationPriorities

  var priorities: [Operation.QueuePriority] {
    switch self {
    case .operationOrder: return [.normal, .normal, .normal, .normal, .normal]
    case .operationOrder2: return [.veryLow, .low, .normal, .high, .veryHigh]
    case .operationPriorities: return [.normal, .low, .veryHigh, .veryLow]
    }
  }

  var queueOrder: [Int] {
    switch self {
    case .operationOrder: return [0, 1, 2, 3, 4]
    case .operationOrder2: return [4, 3, 2, 1, 0]
    case .operationPriorities: return [2, 0, 1, 3]
    }
  }
}

/// The corelibs `TestOperationQueue` cases whose outcome depends on the queue (see
/// `CorelibsOperationQueueCasesTests` for the list): each checks the queue's behaviour once the
/// job's queue is handed out, and, on the private queue, what the docs promise instead.
@Suite("corelibs OperationQueue cases: the queue", .timeLimit(.minutes(3)))
struct CorelibsOperationQueueCasesQueueTests {
  /// `test_CurrentQueueOnBackgroundQueue`: inside a task, `OperationQueue.current` is the job's
  /// queue once handed out, `nil` on the private queue (documented).
  @Test(arguments: QueueRoute.allCases)
  func currentQueue(route: QueueRoute) async throws {
    let current = Locked<[OperationQueue?]>([])
    let job = CorelibsCaseJob(handOut: route == .handedOut) { job in
      job.trackAndQueue(BlockTask { current.mutate { $0.append(OperationQueue.current) } })
    }
    #expect(await job.runs())
    #expect(current.value.count == 1)
    let first = current.value.first ?? nil
    #expect(first === (route == .handedOut ? job.queueOfTasks : nil))
  }

  /// `test_CurrentQueueOnBackgroundQueueWithSelfCancel`: a task that cancels all its queue's
  /// operations (reading `taskQueue`, which hands the queue out) does not crash; it cancels
  /// itself only if it is one of them: not when the job started it itself (documented).
  @Test(arguments: QueueRoute.allCases)
  func cancelAllOperationsFromInsideATask(route: QueueRoute) async throws {
    let jobBox = Locked<CorelibsCaseJob?>(nil)
    let taskBox = Locked<BlockTask?>(nil)
    let seen = Locked<(inOperations: Bool, cancelled: Bool)?>(nil)
    let task = BlockTask {
      guard let job = jobBox.value, let task = taskBox.value else { return }
      let queue = job.taskQueue
      let inOperations = queue.operations.contains(task)
      queue.cancelAllOperations()
      seen.mutate { $0 = (inOperations, task.isCancelled) }
    }
    taskBox.mutate { $0 = task }
    let job = CorelibsCaseJob(handOut: route == .handedOut) { $0.trackAndQueue(task) }
    jobBox.mutate { $0 = job }
    job.startJob()
    #expect(await eventually { job.isFinished })
    jobBox.mutate { $0 = nil }
    taskBox.mutate { $0 = nil }
    #expect(seen.value?.inOperations == (route == .handedOut))
    #expect(seen.value?.cancelled == (route == .handedOut))
    #expect(task.isFinished)
  }

  /// `test_CurrentQueueWithCustomUnderlyingQueue`, `test_CurrentQueueWithUnderlyingQueueResetToNil`
  /// and `test_isSuspended`: after a hand-out, a serial queue with an underlying dispatch queue,
  /// suspended, holds a task back; resumed from that dispatch queue, it runs there (or on the
  /// queue's own once the underlying queue is reset), with the job's queue as `current`.
  @Test(arguments: [false, true])
  func underlyingQueueAfterAHandOut(reset: Bool) async throws {
    let key = DispatchSpecificKey<String>()
    let underlying = DispatchQueue(label: "underlying_queue")
    underlying.setSpecific(key: key, value: "underlying")
    let seen = Locked<(current: OperationQueue?, specific: String?)?>(nil)
    let tracked = Latch()
    let job = CorelibsCaseJob { job in
      job.trackAndQueue(
        BlockTask { seen.mutate { $0 = (OperationQueue.current, DispatchQueue.getSpecific(key: key)) } })
      tracked.open()
    }
    let queue = job.taskQueue
    queue.maxConcurrentOperationCount = 1
    queue.underlyingQueue = underlying
    if reset { queue.underlyingQueue = nil }
    queue.isSuspended = true
    job.startJob()
    #expect(await tracked.waitOpen())
    #expect(queue.operationCount == 1)
    #expect(seen.value == nil)
    underlying.async { queue.isSuspended = false }
    #expect(await eventually { job.isFinished })
    #expect(seen.value?.current === queue)
    #expect(seen.value?.specific == (reset ? nil : "underlying"))
  }

  /// `test_CancelWhileSuspended`: tasks cancelled while held back finish, cancelled, without
  /// running once resumed; held back by the job's suspension on the private queue (nobody can
  /// suspend that queue), by the queue's once handed out.
  @Test(arguments: QueueRoute.allCases)
  func cancelWhileSuspended(route: QueueRoute) async throws {
    let ran = Locked(0)
    let tasks = [BlockTask { ran.mutate { $0 += 1 } }, BlockTask { ran.mutate { $0 += 1 } }]
    let tracked = Latch()
    let job = CorelibsCaseJob(handOut: route == .handedOut) { job in
      if route == .privateQueue { job.suspend() }
      for task in tasks { job.trackAndQueue(task) }
      tracked.open()
    }
    if route == .handedOut { job.queueOfTasks.isSuspended = true }
    job.startJob()
    #expect(await tracked.waitOpen())
    for task in tasks {
      #expect(!task.isExecuting && !task.isFinished)
      task.cancel()
    }
    if route == .handedOut {
      job.queueOfTasks.isSuspended = false
      #expect(await returnsOnAThread { job.queueOfTasks.waitUntilAllOperationsAreFinished() })
    } else {
      job.resume()
    }
    #expect(await eventually { job.isFinished })
    #expect(ran.value == 0)
    for task in tasks {
      #expect(task.isCancelled && !task.isExecuting && task.isFinished)
    }
    #expect(job.ownQueueFlag?.isExposed == (route == .handedOut))
  }

  /// `test_OperationOrder`, `test_OperationOrder2`, `test_OperationPriorities`: once handed out, a
  /// queue of one operation at a time, resumed after all were added, runs them by priority, then
  /// in order added; on the private queue, a job's limit of one runs them in tracking order
  /// (`queuePriority` only orders operations waiting for a queue's slot, documented).
  @Test(arguments: QueueRoute.allCases, SerialOrderCase.allCases)
  func serialOrder(route: QueueRoute, order: SerialOrderCase) async throws {
    let ran = Locked<[Int]>([])
    let tasks = order.priorities.enumerated().map { index, priority in
      let task = BlockTask { ran.mutate { $0.append(index) } }
      task.queuePriority = priority
      return task
    }
    let job = CorelibsCaseJob(handOut: route == .handedOut) { job in
      if route == .privateQueue { job.setMaxConcurrentTasks(1, forGroup: BlockTask.self) }
      for task in tasks { job.trackAndQueue(task) }
    }
    if route == .handedOut {
      job.queueOfTasks.maxConcurrentOperationCount = 1
      job.queueOfTasks.isSuspended = true
    }
    job.startJob()
    if route == .handedOut {
      #expect(await eventually { job.queueOfTasks.operationCount == tasks.count })
      job.queueOfTasks.isSuspended = false
    }
    #expect(await eventually { job.isFinished })
    #expect(ran.value == (route == .handedOut ? order.queueOrder : Array(tasks.indices)))
    #expect(job.ownQueueFlag?.isExposed == (route == .handedOut))
  }

  /// `test_OperationCount`: once handed out, the queue counts and lists the job's tasks in the
  /// order added, and none after `waitUntilAllOperationsAreFinished()`.
  @Test func operationCountAfterAHandOut() async throws {
    let tasks = (0..<3).map { _ in BlockTask {} }
    let tracked = Latch()
    let job = CorelibsCaseJob(handOut: true) { job in
      for task in tasks { job.trackAndQueue(task) }
      tracked.open()
    }
    let queue = job.queueOfTasks
    queue.isSuspended = true
    job.startJob()
    #expect(await tracked.waitOpen())
    #expect(queue.operationCount == 3)
    #expect(queue.operations == tasks)
    queue.isSuspended = false
    #expect(await returnsOnAThread { queue.waitUntilAllOperationsAreFinished() })
    #expect(queue.operationCount == 0 && queue.operations.isEmpty)
    #expect(tasks.allSatisfy { $0.isFinished })
  }

  /// `test_WaitUntilFinished`: once handed out, `waitUntilAllOperationsAreFinished()` waits for a
  /// task that depends on an operation of another queue.
  @Test func waitUntilAllOperationsAreFinishedWaitsForADependentTask() async throws {
    let gate = ManualTask("gate")
    let task = BlockTask {}
    task.addDependency(gate)
    let job = CorelibsCaseJob(handOut: true) { $0.trackAndQueue(task) }
    let queue = job.queueOfTasks
    OperationQueue().addOperation(gate)
    job.startJob()
    #expect(await gate.startedLatch.waitOpen())
    #expect(await eventually { queue.operationCount == 1 })
    let finishedAtReturn = Locked<Bool?>(nil)
    let waiting = Task {
      await returnsOnAThread {
        queue.waitUntilAllOperationsAreFinished()
        finishedAtReturn.mutate { $0 = task.isFinished }
      }
    }
    // It would return within this bounded wait if it did not wait for the task.
    #expect(await !eventually(within: .milliseconds(200)) { finishedAtReturn.value != nil })
    gate.finish()
    #expect(await waiting.value)
    #expect(finishedAtReturn.value == true)
    #expect(queue.operationCount == 0)
  }

  /// A hand-out while a task the job started itself runs: the queue neither lists, counts, waits
  /// for, cancels nor limits it (documented); tasks queued after go through the queue.
  @Test func aTaskStartedBeforeAHandOutStaysOutOfTheQueue() async throws {
    let running = ManualTask("running")
    let job = CorelibsCaseJob { $0.trackAndQueue(running) }
    job.startJob()
    #expect(await running.startedLatch.waitOpen())
    let queue = job.taskQueue
    #expect(queue.operationCount == 0 && !queue.operations.contains(running))
    #expect(await returnsOnAThread { queue.waitUntilAllOperationsAreFinished() })
    queue.cancelAllOperations()
    #expect(!running.isCancelled && running.isExecuting)
    queue.maxConcurrentOperationCount = 1
    let current = Locked<OperationQueue?>(nil)
    let later = BlockTask { current.mutate { $0 = OperationQueue.current } }
    job.trackAndQueue(later)
    #expect(await eventually { later.isFinished })
    #expect(current.value === queue)
    #expect(running.isExecuting)
    running.finish()
    #expect(await eventually { job.isFinished })
  }
}

/// Runs `body`, which blocks (`waitUntilFinished()` and its kin are unavailable from async code),
/// on a thread of its own; `false` if it did not return within 30 seconds.
private func returnsOnAThread(_ body: @escaping @Sendable () -> Void) async -> Bool {
  let returned = Latch()
  Thread {
    body()
    returned.open()
  }.start()
  return await returned.waitOpen()
}
