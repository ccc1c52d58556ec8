import Foundation

/// Writes a ``TimelineLayout`` as one self-contained HTML page: a legend and an SVG timeline, with
/// a row per lane of each job (nested jobs indented below their parents), a colour per group, a
/// time axis, failed tasks outlined in red with a red mark above them, cancelled ones hatched, and
/// a `<title>` tooltip on every slice. No script, no font or image from the network.
enum TimelineHTMLWriter {
  static let labelWidth = 260.0
  static let chartWidth = 1100.0
  static let laneHeight = 16.0
  static let headerHeight = 22.0
  static let axisHeight = 28.0

  /// Colours for groups in the order they first run; none of them red, which marks failures.
  static let palette = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7", "#86bcb6",
    "#bab0ac", "#8cd17d", "#a0cbe8",
  ]

  static func colour(ofGroupAt index: Int) -> String {
    if index < palette.count { return palette[index] }
    // Further groups: hues a golden angle apart, kept away from red.
    let hue = 30 + (Double(index - palette.count) * 137.508).truncatingRemainder(dividingBy: 300)
    return "hsl(" + String(format: "%.1f", hue) + ", 55%, 55%)"
  }

  static func html(for layout: TimelineLayout, title: String?) -> String {
    let heading = title ?? layout.tracks.first.map { "\($0.name) timeline" } ?? "JobKit timeline"
    let colours = Dictionary(
      layout.groups.enumerated().map { ($0.element, colour(ofGroupAt: $0.offset)) },
      uniquingKeysWith: { first, _ in first })
    let slices = layout.tracks.flatMap(\.slices)
    var page = """
      <!DOCTYPE html>
      <html lang="en">
      <head>
      <meta charset="utf-8">
      <title>\(escaped(heading))</title>
      <style>
      body { font: 13px/1.4 -apple-system, "Segoe UI", "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 16px; color: #222; background: #fff; }
      h1 { font-size: 18px; margin: 0 0 4px; }
      p.summary { margin: 0 0 8px; color: #555; }
      ul.legend { list-style: none; padding: 0; margin: 0 0 10px; display: flex; flex-wrap: wrap; gap: 4px 16px; }
      ul.legend li { display: flex; align-items: center; gap: 6px; }
      ul.legend svg { flex: none; }
      svg.timeline text { font-size: 11px; fill: #333; }
      svg.timeline text.track { font-weight: bold; }
      svg.timeline text.lane { fill: #777; }
      svg.timeline .grid { stroke: #e4e4e4; stroke-width: 1; }
      svg.timeline rect.task { stroke: rgba(0,0,0,0.25); stroke-width: 0.5; }
      svg.timeline rect.task:hover { stroke: #000; stroke-width: 1.5; }
      svg.timeline rect.failed { stroke: #d62728; stroke-width: 2; }
      svg.timeline rect.cancelled { stroke: #555; stroke-dasharray: 3 2; }
      svg.timeline .mark { pointer-events: none; }
      </style>
      </head>
      <body>
      <h1>\(escaped(heading))</h1>

      """
    let failed = slices.filter { if case .failed = $0.outcome { return true } else { return false } }.count
    let cancelled = slices.filter { $0.outcome == .cancelled }.count
    page += "<p class=\"summary\">\(layout.tracks.count) job\(layout.tracks.count == 1 ? "" : "s"), "
    page += "\(slices.count) task\(slices.count == 1 ? "" : "s") (\(failed) failed, \(cancelled) cancelled) "
    page += "in \(escaped(time(layout.span))). Hover a bar for its task, group and times.</p>\n"
    page += legend(layout, colours: colours, slices: slices)
    page += svg(layout, colours: colours)
    page += "</body>\n</html>\n"
    return page
  }

  private static func legend(_ layout: TimelineLayout, colours: [String: String], slices: [TimelineLayout.Slice])
    -> String
  {
    var totals: [String: (count: Int, time: Double)] = [:]
    for slice in slices {
      totals[slice.group, default: (0, 0)].count += 1
      totals[slice.group, default: (0, 0)].time += slice.duration
    }
    var items: [String] = []
    for group in layout.groups {
      let total = totals[group] ?? (0, 0)
      items.append(
        "<li><svg width=\"14\" height=\"14\"><rect class=\"swatch\" width=\"14\" height=\"14\" fill=\"\(colours[group]!)\"/></svg>"
          + "\(escaped(group)): \(total.count) task\(total.count == 1 ? "" : "s"), \(escaped(time(total.time)))</li>")
    }
    items.append(
      "<li><svg width=\"14\" height=\"14\"><rect width=\"14\" height=\"14\" fill=\"#ddd\" stroke=\"#d62728\" stroke-width=\"3\"/></svg>failed (red outline and mark)</li>"
    )
    items.append(
      "<li><svg width=\"14\" height=\"14\"><defs>\(hatchPattern(id: "legend-hatch"))</defs><rect width=\"14\" height=\"14\" fill=\"#ddd\"/><rect width=\"14\" height=\"14\" fill=\"url(#legend-hatch)\"/></svg>cancelled (hatched)</li>"
    )
    items.append(
      "<li><svg width=\"14\" height=\"14\"><rect x=\"6\" width=\"2\" height=\"14\" fill=\"#222\"/></svg>allTasksFinished</li>"
    )
    return "<ul class=\"legend\">\n" + items.joined(separator: "\n") + "\n</ul>\n"
  }

  private static func hatchPattern(id: String) -> String {
    "<pattern id=\"\(id)\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
      + "<rect width=\"3\" height=\"6\" fill=\"rgba(255,255,255,0.7)\"/></pattern>"
  }

  private static func svg(_ layout: TimelineLayout, colours: [String: String]) -> String {
    let span = layout.span > 0 ? layout.span : 1
    func x(_ seconds: Double) -> Double { labelWidth + max(0, seconds) / span * chartWidth }
    let rows = layout.tracks.reduce(0.0) { $0 + headerHeight + Double($1.lanes) * laneHeight }
    let height = axisHeight + rows + 8
    let width = labelWidth + chartWidth + 20
    var body: [String] = []
    body.append(
      "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"\(number(width))\" height=\"\(number(height))\" viewBox=\"0 0 \(number(width)) \(number(height))\">"
    )
    body.append("<defs>\(hatchPattern(id: "hatch"))</defs>")
    // The time axis, with grid lines through every track.
    let step = tickStep(span)
    var tick = 0.0
    while tick <= span * 1.0001 {
      let position = number(x(tick))
      body.append(
        "<line class=\"grid\" x1=\"\(position)\" y1=\"\(number(axisHeight - 6))\" x2=\"\(position)\" y2=\"\(number(height))\"/>"
      )
      body.append(
        "<text x=\"\(position)\" y=\"\(number(axisHeight - 10))\" text-anchor=\"middle\">\(escaped(time(tick)))</text>")
      tick += step
    }
    var y = axisHeight
    for track in layout.tracks {
      let indent = 6 + Double(track.depth) * 14
      var heading = "\(track.name) · \(time(track.end - track.begin))"
      switch track.outcome {
      case nil: heading += " · running"
      case .succeeded?: break
      case .failed?: heading += " · failed"
      case .cancelled?: heading += " · cancelled"
      }
      body.append("<g class=\"job\">")
      body.append(
        "<text class=\"track\" x=\"\(number(indent))\" y=\"\(number(y + 15))\">\(escaped(clipped(heading, to: Int((labelWidth - indent) / 6.5))))<title>\(escaped(trackTitle(track)))</title></text>"
      )
      let jobColour: String
      switch track.outcome {
      case .failed?: jobColour = "#d62728"
      case .cancelled?: jobColour = "#888"
      default: jobColour = "#444"
      }
      body.append(
        "<rect class=\"span\" x=\"\(number(x(track.begin)))\" y=\"\(number(y + 8))\" width=\"\(number(max(1, x(track.end) - x(track.begin))))\" height=\"5\" fill=\"\(jobColour)\"><title>\(escaped(trackTitle(track)))</title></rect>"
      )
      for marker in track.markers {
        switch marker.kind {
        case .allTasksFinished:
          body.append(
            "<rect class=\"marker\" x=\"\(number(x(marker.at) - 1))\" y=\"\(number(y + 3))\" width=\"2\" height=\"15\" fill=\"#222\"><title>allTasksFinished at \(escaped(time(marker.at)))</title></rect>"
          )
        case .groupFinished(let group):
          body.append(
            "<rect class=\"marker\" x=\"\(number(x(marker.at) - 0.5))\" y=\"\(number(y + 14))\" width=\"1\" height=\"6\" fill=\"\(colours[group] ?? "#999")\"><title>groupFinished \(escaped(group)) at \(escaped(time(marker.at)))</title></rect>"
          )
        case .timeLimitReached:
          // Across the job's header and lanes: from here on, everything below it is stopped.
          body.append(
            "<rect class=\"limit\" x=\"\(number(x(marker.at) - 1))\" y=\"\(number(y))\" width=\"2\" height=\"\(number(headerHeight + Double(track.lanes) * laneHeight))\" fill=\"#d62728\"><title>time limit ran out at \(escaped(time(marker.at)))</title></rect>"
          )
        }
      }
      body.append("</g>")
      y += headerHeight
      for lane in 0..<track.lanes {
        let rowY = y + Double(lane) * laneHeight
        if lane % 2 == 1 {
          body.append(
            "<rect x=\"\(number(labelWidth))\" y=\"\(number(rowY))\" width=\"\(number(chartWidth))\" height=\"\(number(laneHeight))\" fill=\"#f6f6f6\"/>"
          )
        }
        body.append(
          "<text class=\"lane\" x=\"\(number(indent + 10))\" y=\"\(number(rowY + 12))\">lane \(lane + 1)</text>")
      }
      for slice in track.slices {
        let rowY = y + Double(slice.lane) * laneHeight + 2
        let left = x(slice.begin)
        let barWidth = max(1, x(slice.end) - left)
        var classes = "task"
        switch slice.outcome {
        case .succeeded: break
        case .failed: classes += " failed"
        case .cancelled: classes += " cancelled"
        }
        let geometry =
          "x=\"\(number(left))\" y=\"\(number(rowY))\" width=\"\(number(barWidth))\" height=\"\(number(laneHeight - 4))\""
        body.append(
          "<rect class=\"\(classes)\" \(geometry) fill=\"\(colours[slice.group] ?? "#999")\"><title>\(escaped(sliceTitle(slice)))</title></rect>"
        )
        switch slice.outcome {
        case .succeeded:
          break
        case .failed:
          // A mark that shows even on a bar a pixel wide.
          body.append(
            "<path class=\"mark\" d=\"M\(number(left - 4)) \(number(rowY - 2))h8l-4 5z\" fill=\"#d62728\"/>")
        case .cancelled:
          body.append("<rect class=\"mark\" \(geometry) fill=\"url(#hatch)\"/>")
        }
      }
      y += Double(track.lanes) * laneHeight
    }
    body.append("</svg>")
    return body.joined(separator: "\n") + "\n"
  }

  private static func trackTitle(_ track: TimelineLayout.Track) -> String {
    var lines = ["\(track.name) (\(track.type))"]
    lines.append("from \(time(track.begin)) to \(time(track.end)): \(time(track.end - track.begin))")
    lines.append("\(track.slices.count) task(s) on \(track.lanes) lane(s)")
    switch track.outcome {
    case nil: lines.append("still running when drawn")
    case .succeeded?: lines.append("finished")
    case .failed(let error)?: lines.append("failed: \(error)")
    case .cancelled?: lines.append("cancelled")
    }
    return lines.joined(separator: "\n")
  }

  private static func sliceTitle(_ slice: TimelineLayout.Slice) -> String {
    var lines = [slice.task == slice.group ? slice.task : "\(slice.task) (\(slice.group))"]
    lines.append("\(time(slice.duration)), from \(time(slice.begin)) to \(time(slice.end))")
    if let waited = slice.waited {
      lines.append("waited \(time(waited)) after it was tracked")
    }
    switch slice.outcome {
    case .succeeded: break
    case .failed(let error): lines.append("failed: \(error)")
    case .cancelled: lines.append("cancelled")
    }
    if slice.nestedJob != nil {
      lines.append("a nested job: its tasks are on its own track below")
    }
    return lines.joined(separator: "\n")
  }

  /// A round step for about ten ticks over `span` seconds.
  static func tickStep(_ span: Double) -> Double {
    let raw = span / 10
    let magnitude = pow(10, floor(log10(raw)))
    for factor in [1.0, 2, 5] where factor * magnitude >= raw {
      return factor * magnitude
    }
    return 10 * magnitude
  }

  /// `seconds` in the unit that reads best.
  static func time(_ seconds: Double) -> String {
    switch abs(seconds) {
    case 0: return "0"
    case ..<1e-3: return String(format: "%.0f µs", seconds * 1e6)
    case ..<1: return String(format: seconds < 0.01 ? "%.2f ms" : "%.1f ms", seconds * 1e3)
    default: return String(format: "%.2f s", seconds)
    }
  }

  private static func number(_ value: Double) -> String {
    String(format: "%.1f", value)
  }

  private static func clipped(_ text: String, to count: Int) -> String {
    text.count <= count ? text : String(text.prefix(max(1, count - 1))) + "…"
  }

  /// `text` for HTML text and attribute values.
  static func escaped(_ text: String) -> String {
    var result = ""
    result.reserveCapacity(text.utf8.count)
    for character in text {
      switch character {
      case "&": result += "&amp;"
      case "<": result += "&lt;"
      case ">": result += "&gt;"
      case "\"": result += "&quot;"
      case "'": result += "&#39;"
      default: result.append(character)
      }
    }
    return result
  }
}
