extension CompositionPlan {
  /// The workflow in a few lines, for a failure message.
  var summary: String {
    var lines = ["composition seed \(seed): \(root.all.count) nodes"]
    lines.append("  tree: " + Self.describe(root))
    if !storms.isEmpty { lines.append("  storms: " + storms.map(\.description).joined(separator: "; ")) }
    let off = Set(CompositionFeature.allCases).subtracting(features)
    if !off.isEmpty { lines.append("  features off: \(off.sorted().map(\.rawValue))") }
    return lines.joined(separator: "\n")
  }

  static func describe(_ node: NodePlan) -> String {
    var text = "n\(node.id) "
    switch node.kind {
    case .leaf(let spec):
      text +=
        "leaf(\(spec.finish)\(spec.fails ? ",fails" : "")\(spec.honorsCancel ? ",honors" : "")"
        + "\(spec.limited ? ",limited" : "")\(spec.addsLate ? ",adds" : ""))"
    case .sequential(let stops, let taking): text += "seq(\(stops ? "stops," : "")\(taking ? "taking" : "array"))"
    case .concurrent(let takingMax): text += "conc(\(takingMax.map { "taking \($0)" } ?? "array"))"
    case .pipeline(let steps, let failing, let asyncSteps):
      text += "pipeline(\(steps)\(failing.map { ",fails at \($0)" } ?? "")\(asyncSteps ? ",async" : ""))"
    case .job(let limit): text += "job(\(limit.map { "limit \($0)" } ?? "no limit"))"
    case .queue(let sequential, let paused): text += "queue(\(sequential ? "seq" : "conc"), paused adds \(paused))"
    case .dispatch(let concurrent): text += "dispatch(\(concurrent ? "conc" : "seq"))"
    }
    if case .queued = node.tracking {} else { text += " [\(node.tracking)]" }
    if let limit = node.timeLimit { text += " [limit \(limit) s]" }
    if !node.children.isEmpty { text += " [" + node.children.map(describe).joined(separator: ", ") + "]" }
    if !node.late.isEmpty { text += " late [" + node.late.map(describe).joined(separator: ", ") + "]" }
    return text
  }
}
