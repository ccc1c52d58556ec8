import Foundation

/// Progress and events leave the job's lock as counts and records; one thread at a time writes
/// them to the `Progress` object and the event streams, with no lock held.
extension JobController {
  /// Applies `transition` under the job's lock; if it recorded events and nobody delivers them,
  /// delivers them after releasing the lock.
  @inline(__always)
  func withJobState<Result>(_ transition: (inout JobState) -> Result) -> Result {
    let (result, deliver) = jobState.withLock { state in
      let result = transition(&state)
      return (result, state.listeners.beginDelivery())
    }
    if deliver {
      deliverEvents()
    }
    return result
  }

  /// Stamps and yields the recorded events until none are left, ending the streams after the
  /// job's last event. Only the thread that `beginDelivery()` chose calls it.
  private func deliverEvents() {
    while let delivery = jobState.withLock({ $0.listeners.nextDelivery() }) {
      let now = ContinuousClock.now
      for pending in delivery.events {
        let event = pending.stamped(now)
        for listener in delivery.listeners {
          listener.yield(event)
        }
      }
      if delivery.close {
        for listener in delivery.listeners {
          listener.finish()
        }
      }
    }
  }

  /// Writes the job's counts to `progress` until they stop changing; the caller was made the
  /// publisher by a transition. No lock is held while `Progress` changes (on Apple platforms its
  /// KVO observers run then). Finishes the job if its finish waited for this publication.
  func publishProgress(to progress: Progress) {
    while true {
      switch jobState.withLock({ $0.progress.nextPublication() }) {
      case .write(let total, let completed):
        progress.totalUnitCount = total
        progress.completedUnitCount = completed
      case .done:
        return
      case .finishJob(let finish):
        perform(finish)
        return
      }
    }
  }
}
