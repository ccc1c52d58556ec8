import Foundation
import JobKit

/// The error a fail storm stops a job node with.
struct StormError: Error, Equatable {
  let node: Int
}

/// The reason a `cancelReason` storm cancels a node with.
struct ReasonError: Error, Equatable {
  let node: Int
}

/// Carries out the storms of a composition workflow: from the triggering thread (inline) or
/// from a global queue's thread, after a random number of yields.
enum CompositionStorms {
  static func fire(_ storms: [(Int, StormPlan)], log: CompositionLog) {
    for (index, storm) in storms {
      if storm.inline {
        strike(index, storm, log: log)
      } else {
        DispatchQueue.global().async { strike(index, storm, log: log) }
      }
    }
  }

  private static func strike(_ index: Int, _ storm: StormPlan, log: CompositionLog) {
    for _ in 0..<storm.yields { sched_yield() }
    switch storm.action {
    case .cancel(let node):
      guard let operation = log.target(node) as? Operation else { return }
      log.strike(index)
      operation.cancel()
      log.stormReturned(index)
    case .fail(let node):
      if let dispatch = log.dispatchJob(node) {
        log.strike(index)
        dispatch.fail(StormError(node: node))
        log.stormReturned(index)
      } else if let job = log.target(node) as? JobController {
        log.strike(index)
        job.fail(StormError(node: node))
        log.stormReturned(index)
      }
    case .cancelAll(let node):
      guard let queue = log.queue(node) else { return }
      log.strike(index)
      queue.cancelAll()
      log.stormReturned(index)
    case .pause(let node):
      guard let queue = log.queue(node) else { return }
      log.strike(index)
      queue.pause()
      for _ in 0..<storm.yields { sched_yield() }
      queue.resume()
    case .cancelReason(let node):
      guard let operation = log.target(node) as? ConcurrentOperation else { return }
      log.strike(index)
      operation.cancel(reason: ReasonError(node: node))
      log.stormReturned(index)
    case .advance(let seconds):
      log.strike(index)
      log.clock.advance(by: .seconds(seconds))
      log.stormReturned(index)
    case .suspend(let node):
      guard let operation = log.target(node) as? ConcurrentOperation else { return }
      operation.suspend()
      for _ in 0..<storm.yields { sched_yield() }
      operation.resume()
    }
  }
}
