import Foundation
import JobKit

// MGCommand's example script, with JobKit groups:
//
//   sequential {
//     Delay(1) Delay(1) Delay(1)
//     Print("concurrent {")
//     concurrent { Delay(1) Delay(1) Delay(1) }
//     Print("}")
//     Delay(1) Delay(1) Delay(1)
//     Block("Finished")
//   }
//
// Usage: command-script [--scale X]   (--scale 0.1 makes every delay 10 times shorter)

let usage = "usage: command-script [--scale X]  (X > 0 multiplies every delay; default 1)"

func parseScale(_ arguments: [String]) -> Double? {
  var scale = 1.0
  var rest = arguments[...]
  while let argument = rest.popFirst() {
    let value: String?
    if argument == "--scale" {
      value = rest.popFirst()
    } else if argument.hasPrefix("--scale=") {
      value = String(argument.dropFirst("--scale=".count))
    } else {
      return nil
    }
    guard let value, let parsed = Double(value), parsed > 0, parsed.isFinite else { return nil }
    scale = parsed
  }
  return scale
}

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.contains("--help") || arguments.contains("-h") {
  print(usage)
  exit(0)
}
guard let scale = parseScale(arguments) else {
  FileHandle.standardError.write(Data((usage + "\n").utf8))
  exit(2)
}

let log = ScriptLog()

/// Delays `numbers` (one second each, times the scale), named "delay <n>".
func delays(_ numbers: ClosedRange<Int>) -> [Operation] {
  numbers.map { Delay("delay \($0)", seconds: 1 * scale, log: log) }
}

func say(_ text: String) -> BlockTask {
  BlockTask { log.print(text) }
}

let script = SequentialGroup(
  delays(1...3) + [
    say("concurrent {"),
    ConcurrentGroup(delays(4...6)),
    say("}"),
  ] + delays(7...9) + [
    BlockTask { context in
      log.print("Finished: \(context[.delaysDone] ?? 0) delays done")
    }
  ]
)

log.print("script started (scale \(scale))")
do {
  try script.runAndWait()
} catch {
  log.print("script failed: \(error)")
  exit(1)
}
