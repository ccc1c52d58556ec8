import Foundation
import JobKitPostgres

/// The dashboard's pause and resume buttons, outside its live part (a refresh keeps a token
/// being typed).
extension ConsolePages {
  static func queueControls(
    queues: [String], paused: [String: Date], readOnly: Bool, notice: String?, paths: ConsolePaths
  ) -> HTML {
    guard !queues.isEmpty else { return "" }
    let noticeText: String? =
      switch notice {
      case "paused": "Paused: its workers claim no task until it is resumed; running tasks finish."
      case "resumed": "Resumed: its workers claim its tasks again."
      default: nil
      }
    let shown: HTML = noticeText.map { "<p class=\"notice\">\($0)</p>" } ?? ""
    let disabled: HTML = readOnly ? " disabled" : ""
    let forms = queues.map { queue -> HTML in
      let isPaused = paused[queue] != nil
      let action = isPaused ? "resume" : "pause"
      let since: HTML =
        paused[queue].map { date in
          " <span class=\"paused\">paused since \(date.formatted(.iso8601.time(includingFractionalSeconds: false))) UTC</span>"
        } ?? ""
      return """
        <form class="action" method="post" action="\(paths.queueAction(action))" data-queue="\(queue)">\
        <input type="hidden" name="queue" value="\(queue)">\
        <input type="password" name="token" placeholder="token" autocomplete="off"\(disabled)>\
        <button type="submit" name="action" value="\(action)"\(disabled)>\(isPaused ? "Resume" : "Pause") \(queue)\
        </button>\(since)</form>
        """
    }
    let readOnlyNote: HTML =
      readOnly ? "<p class=\"readonly\">Read-only: the console was started without a token.</p>" : ""
    return """
      <section class="actions queues"><h2>Pause and resume</h2>\(shown)\(readOnlyNote)\(forms)</section>
      """
  }
}
