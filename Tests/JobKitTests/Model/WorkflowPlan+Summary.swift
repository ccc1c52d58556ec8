import JobKit

extension WorkflowPlan {
  /// A short description of the workflow for a failure message.
  var summary: String {
    let starts = roots.map { "\($0.start)" }.joined(separator: ", ")
    var lines = [
      "seed \(seed): \(roots.count) root job(s) [\(starts)], ~\(taskCount) task(s), defect shapes \(shapes.sorted())"
        + (sharesPlainOperation ? ", roots share \(sharedOperations) BlockOperation(s)" : "")
    ]
    func describe(_ job: JobPlan) {
      var line = "  job \(job.id) (depth \(job.depth), \(job.policy)"
      if !job.limits.isEmpty {
        line +=
          ", limits "
          + job.limits.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key)≤\($0.value)" }
          .joined(separator: " ")
      }
      if !job.handlers.isEmpty { line += ", handlers \(job.handlers.map(\.groupKey).sorted())" }
      if job.stop != .none { line += ", stop \(job.stop)" }
      if job.readsProgressInMain { line += ", reads progress in main" }
      if let spec = job.readsProgressAtSpec { line += ", reads progress at s\(spec)" }
      if job.readsParentProgressFromOutside { line += ", first parent progress read from outside" }
      line += "): main [" + job.mainTasks.map(Self.describe).joined(separator: ", ") + "]"
      if !job.refills.isEmpty {
        line +=
          job.refills.count > 5
          ? ", \(job.refills.count) refills"
          : ", refills " + job.refills.map { "[" + $0.map(Self.describe).joined(separator: ", ") + "]" }.joined()
      }
      for (key, specs) in job.groupFollowups.sorted(by: { $0.key < $1.key }) {
        line += ", on \(key) [" + specs.map(Self.describe).joined(separator: ", ") + "]"
      }
      lines.append(line)
      for (spec, _) in job.allSpecs {
        if case .nested(let nested) = spec.work { describe(nested) }
      }
    }
    for root in roots { describe(root.job) }
    return lines.joined(separator: "\n")
  }

  private static func describe(_ spec: TaskSpec) -> String {
    var text = "s\(spec.id) "
    switch spec.work {
    case .kind(let kind, let finish, let fails): text += "\(kind).\(finish)" + (fails ? ".fails" : "")
    case .nested(let plan): text += "job\(plan.id)"
    case .sequential(let leaves): text += "seq\(leaves.count)" + (leaves.contains { $0.fails } ? ".fails" : "")
    case .concurrent(let leaves): text += "conc\(leaves.count)" + (leaves.contains { $0.fails } ? ".fails" : "")
    case .blockTask(let leaf): text += "block" + (leaf.isAsync ? ".async" : "") + (leaf.fails ? ".fails" : "")
    case .pipeline(let steps, let failing): text += "pipe\(steps)" + (failing.map { ".fails@\($0)" } ?? "")
    case .dispatch(let leaves, let concurrent): text += "dispatch\(leaves.count)" + (concurrent ? ".conc" : "")
    }
    switch spec.tracking {
    case .queued(let completion): text += completion ? " tq+c" : " tq"
    case .byTest(let completion): text += completion ? " t+c" : " t"
    case .timeout(let milliseconds): text += " timeout\(milliseconds)ms"
    case .retry(let failing, let maxAttempts): text += " retry\(failing)/\(maxAttempts)"
    case .alreadyStarted: text += " t+c(started)"
    }
    if spec.triggersOutsideStop { text += " !stop" }
    if !spec.children.isEmpty { text += " {" + spec.children.map(describe).joined(separator: ", ") + "}" }
    return text
  }
}
