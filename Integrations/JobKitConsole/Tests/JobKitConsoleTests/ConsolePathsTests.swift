import JobKitPostgres
import Testing

@testable import JobKitConsole

@Suite struct ConsolePathsTests {
  @Test(arguments: [("", ""), ("/", ""), ("jobs", "/jobs"), ("/jobs/", "/jobs"), ("/a//b/", "/a/b")])
  func prefixesAreNormalised(given: String, prefix: String) {
    let paths = ConsolePaths(prefix: given)
    #expect(paths.prefix == prefix)
    #expect(paths.dashboard == (prefix.isEmpty ? "/" : prefix))
    #expect(paths.task(7) == prefix + "/tasks/7")
  }

  @Test func aListsParametersArePercentEncoded() {
    let paths = ConsolePaths(prefix: "/jobs")
    let filter = RemoteQueue.TaskFilter(
      queue: "q 1", kind: "a&b", state: "failed", keyPrefix: "k/é\"", inputField: "a.b", inputValue: "1+1")
    let cursor = RemoteQueue.TaskCursor(createdMicroseconds: 1_765_000_000_123_456, id: 42)
    #expect(
      paths.tasks(filter, after: cursor)
        == "/jobs/tasks?queue=q%201&kind=a%26b&state=failed&key=k%2F%C3%A9%22&field=a.b&value=1%2B1"
        + "&after=1765000000123456.42")
    #expect(paths.tasks() == "/jobs/tasks")
  }

  @Test func aCursorRoundTripsThroughItsParameter() {
    let cursor = RemoteQueue.TaskCursor(createdMicroseconds: 1_765_000_000_123_456, id: 9_007_199_254_740_993)
    #expect(RemoteQueue.TaskCursor(parameter: cursor.parameter) == cursor)
  }

  @Test(arguments: ["", "12", "12.", ".3", "a.b", "1.2.3", "99999999999999999999.1"])
  func aBadCursorIsNone(parameter: String) {
    #expect(RemoteQueue.TaskCursor(parameter: parameter) == nil)
  }

  @Test(arguments: [(0.2, "<1 s"), (42, "42 s"), (184, "3 min 4 s"), (7500, "2 h 5 min"), (273_600, "3 d 4 h")])
  func agesReadAsWords(seconds: Double, words: String) {
    #expect(ConsolePages.age(seconds) == words)
  }
}
