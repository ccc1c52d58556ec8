import Testing

@testable import JobKitConsole

@Suite struct HTMLTests {
  @Test(arguments: [
    ("<script>alert('x')</script>", "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"),
    ("a & b", "a &amp; b"),
    ("\"quoted\"", "&quot;quoted&quot;"),
    ("&lt; already", "&amp;lt; already"),
    ("plain é 🚀", "plain é 🚀"),
    ("", ""),
  ])
  func escapesTheFiveCharacters(text: String, escaped: String) {
    #expect(HTML.escape(text) == escaped)
  }

  @Test func interpolatedValuesAreEscapedAndHTMLIsNot() {
    let key = "<b onclick=\"x()\">"
    let cell: HTML = "<td>\(key)</td>"
    #expect(cell.rendered == "<td>&lt;b onclick=&quot;x()&quot;&gt;</td>")
    let row: HTML = "<tr>\(cell)\([cell, cell])</tr>"
    #expect(row.rendered == "<tr>" + String(repeating: cell.rendered, count: 3) + "</tr>")
    let number = 42
    let attribute: HTML = "<a data-id=\"\(number)\" title=\"\("it's")\">"
    #expect(attribute.rendered == "<a data-id=\"42\" title=\"it&#39;s\">")
  }

  @Test func pagesEscapeEveryValueOfATask() {
    let paths = ConsolePaths(prefix: "/jobs")
    let page = ConsolePages.layout(
      title: "<t>", live: "\("<v>")", refresh: .seconds(1), paths: paths)
    #expect(page.rendered.contains("&lt;t&gt; · JobKit console"))
    #expect(page.rendered.contains("<div id=\"live\">&lt;v&gt;</div>"))
    #expect(!page.rendered.contains("<t>"))
  }
}
