import Foundation
import Testing

@testable import JobKit

#if canImport(FoundationXML)
  import FoundationXML
#endif

/// Counts the elements and `<title>`s of an SVG document, and fails on XML that is not
/// well-formed.
final class SVGCounter: NSObject, XMLParserDelegate {
  var elements: [String: Int] = [:]
  var taskRects = 0
  var taskRectsWithTitle = 0
  private var openTaskRect = false

  func parser(
    _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
    attributes: [String: String] = [:]
  ) {
    elements[name, default: 0] += 1
    if name == "rect", attributes["class"]?.split(separator: " ").contains("task") == true {
      taskRects += 1
      openTaskRect = true
    } else if name == "title", openTaskRect {
      taskRectsWithTitle += 1
    }
  }

  func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
    if name == "rect" { openTaskRect = false }
  }
}

@Suite("TimelineHTMLWriter")
struct TimelineHTMLWriterTests {
  func svg(of html: String) throws -> String {
    let start = try #require(html.range(of: "<svg class=\"timeline\""))
    let end = try #require(html.range(of: "</svg>", range: start.upperBound..<html.endIndex))
    return String(html[start.lowerBound..<end.upperBound])
  }

  func parsed(_ svg: String) -> SVGCounter? {
    let counter = SVGCounter()
    let parser = XMLParser(data: Data(svg.utf8))
    parser.delegate = counter
    return parser.parse() ? counter : nil
  }

  @Test func thePageIsSelfContainedWithABarAndATitlePerTaskAndALegendPerGroup() throws {
    let layout = TraceEventWriterTests().sampleLayout()
    let html = TimelineHTMLWriter.html(for: layout, title: "Run <1> & \"2\"")
    #expect(html.hasPrefix("<!DOCTYPE html>"))
    #expect(html.contains("<title>Run &lt;1&gt; &amp; &quot;2&quot;</title>"))
    #expect(html.contains("<meta charset=\"utf-8\">"))
    // Readable without a network and without scripts.
    #expect(!html.lowercased().contains("<script"))
    #expect(!html.contains("https://"))
    #expect(html.replacingOccurrences(of: "http://www.w3.org/2000/svg", with: "").contains("http://") == false)
    #expect(!html.contains("<link") && !html.contains("@import") && !html.contains("<img"))

    let svg = try svg(of: html)
    let counter = try #require(parsed(svg), "the SVG is well-formed XML")
    let slices = layout.tracks.flatMap(\.slices)
    #expect(counter.taskRects == slices.count)
    #expect(counter.taskRectsWithTitle == slices.count)
    #expect(svg.components(separatedBy: "class=\"task failed\"").count - 1 == 1)
    #expect(svg.components(separatedBy: "class=\"task cancelled\"").count - 1 == 2)
    #expect(svg.contains("fill=\"url(#hatch)\""))
    // One row label per lane, and each job named (the nested one says so in its tooltip).
    let lanes = layout.tracks.reduce(0) { $0 + $1.lanes }
    #expect(svg.components(separatedBy: "class=\"lane\"").count - 1 == lanes)
    #expect(svg.components(separatedBy: "class=\"track\"").count - 1 == layout.tracks.count)
    #expect(svg.contains("Root &quot;quoted&quot;"))

    let legend = try #require(html.range(of: "<ul class=\"legend\">")).upperBound
    let legendEnd = try #require(html.range(of: "</ul>", range: legend..<html.endIndex)).lowerBound
    let items = html[legend..<legendEnd]
    for (index, group) in layout.groups.enumerated() {
      #expect(
        items.contains(
          "fill=\"\(TimelineHTMLWriter.colour(ofGroupAt: index))\"/></svg>\(TimelineHTMLWriter.escaped(group)):"))
    }
    #expect(items.contains("failed") && items.contains("cancelled"))
  }

  @Test func eachGroupHasItsOwnColourAndNoneIsRed() {
    let colours = (0..<40).map(TimelineHTMLWriter.colour(ofGroupAt:))
    #expect(Set(colours).count == colours.count)
    #expect(!colours.contains("#d62728"))
  }

  @Test func anEmptyTimelineIsAPageWithoutBars() throws {
    let html = TimelineHTMLWriter.html(for: TimelineLayout([]), title: nil)
    let counter = try #require(parsed(try svg(of: html)))
    #expect(counter.taskRects == 0)
    #expect(html.contains("0 jobs, 0 tasks"))
  }

  @Test(arguments: [
    (0.0, "0"), (0.000_25, "250 µs"), (0.004_5, "4.50 ms"), (0.25, "250.0 ms"), (12.5, "12.50 s"),
  ])
  func timesReadInTheirUnit(seconds: Double, text: String) {
    #expect(TimelineHTMLWriter.time(seconds) == text)
  }

  @Test(arguments: [(1.0, 0.1), (0.37, 0.05), (2.6e-3, 5e-4), (95.0, 10.0)])
  func ticksAreRoundSteps(span: Double, step: Double) {
    #expect(abs(TimelineHTMLWriter.tickStep(span) - step) < step * 1e-9)
  }
}
