/// A ``JobTimeline``'s recording laid out for drawing: one track per job (nested jobs right after
/// their parents), each task a slice on a lane of its job where it overlaps no other slice.
/// Pure: built from a copy of the recording, with no lock held; both writers draw from it.
struct TimelineLayout: Equatable {
  typealias Outcome = TimelineRecording.Outcome

  /// One task's run. Times are in seconds from the timeline's ``origin``.
  struct Slice: Equatable {
    var task: String
    var group: String
    var begin: Double
    var duration: Double
    var outcome: Outcome
    /// Its lane in its job, from 0.
    var lane = 0
    /// How long it waited between its tracking and its start, if its start was observed.
    var waited: Double?
    /// The id of the nested job this task is, if it was followed.
    var nestedJob: Int?
    /// If its start was delivered in a batch with other events: the delivery before that batch,
    /// back to which lane assignment may move it (see ``assignLanes(_:)``).
    var earliest: Double?

    var end: Double { begin + duration }
  }

  /// A moment in a job's life: a group's last task was routed, `allTasksFinished()` ran, or its
  /// time limit ran out.
  struct Marker: Equatable {
    enum Kind: Equatable {
      case groupFinished(String)
      case allTasksFinished
      case timeLimitReached
    }
    var kind: Kind
    var at: Double
  }

  /// One job.
  struct Track: Equatable {
    var id: Int
    var name: String
    var type: String
    var parent: Int?
    /// 0 for a recorded job, 1 for a job it tracked, and so on.
    var depth: Int
    /// From its `started` event (or its first recorded event) to its `finished` event (or its
    /// last recorded one, while it runs).
    var begin: Double
    var end: Double
    /// `nil` while the job runs (no `finished` event yet).
    var outcome: Outcome?
    var slices: [Slice]
    var lanes: Int
    var markers: [Marker]
  }

  /// The instant all times count from: the first recorded event (or the start of a task that
  /// finished after it but began before it).
  let origin: ContinuousClock.Instant?
  /// Depth first: each job is followed by the jobs it tracked, in the order they were tracked.
  let tracks: [Track]
  /// From 0 to the last recorded moment, in seconds.
  let span: Double
  /// Every group, in the order its first task starts (the order colours are given in).
  let groups: [String]

  init(_ jobs: [TimelineRecording.Job]) {
    // The first event, or the start of a task that began before it (recorded from its finish).
    let origin = jobs.lazy.flatMap(\.events).map { event -> ContinuousClock.Instant in
      if case .taskFinished(_, _, let duration, _, let at) = event { return at - duration }
      return event.at
    }.min()
    self.origin = origin
    func seconds(_ instant: ContinuousClock.Instant) -> Double {
      origin.map { (instant - $0).seconds } ?? 0
    }
    var tracksByID: [Int: Track] = [:]
    for job in jobs {
      tracksByID[job.id] = Self.track(job, seconds: seconds)
    }
    // Each nested job's task in its parent: the parent's slice of that type whose run covers it best.
    for job in jobs {
      guard let parentID = job.parent, var parent = tracksByID[parentID], let nested = tracksByID[job.id] else {
        continue
      }
      let candidates = parent.slices.indices.filter {
        parent.slices[$0].group == job.type && parent.slices[$0].nestedJob == nil
      }
      if let best = candidates.min(by: {
        abs(parent.slices[$0].begin - nested.begin) < abs(parent.slices[$1].begin - nested.begin)
      }) {
        parent.slices[best].nestedJob = job.id
        if nested.outcome == .cancelled, parent.slices[best].outcome == .succeeded {
          parent.slices[best].outcome = .cancelled
        }
        tracksByID[parentID] = parent
      }
    }
    var ordered: [Track] = []
    func visit(_ id: Int, depth: Int) {
      guard var track = tracksByID[id] else { return }
      track.depth = depth
      ordered.append(track)
      for child in jobs where child.parent == id {
        visit(child.id, depth: depth + 1)
      }
    }
    for job in jobs where job.parent == nil || tracksByID[job.parent!] == nil {
      visit(job.id, depth: 0)
    }
    tracks = ordered
    span = ordered.map { track in max(track.end, track.slices.map(\.end).max() ?? 0) }.max() ?? 0
    var groups: [String] = []
    var seen: Set<String> = []
    for slice in ordered.flatMap(\.slices).sorted(by: { $0.begin < $1.begin }) where seen.insert(slice.group).inserted {
      groups.append(slice.group)
    }
    self.groups = groups
  }

  /// One job's track: its tasks matched from their events, then given lanes.
  private static func track(_ job: TimelineRecording.Job, seconds: (ContinuousClock.Instant) -> Double) -> Track {
    struct Pending {
      var tracked: ContinuousClock.Instant
      var started: ContinuousClock.Instant?
      /// The delivery before the one that brought `taskTracked` (then `taskStarted`).
      var floor: ContinuousClock.Instant
      /// Whether its last event (`taskStarted`, else `taskTracked`) came in a batch with others.
      var batched: Bool
    }
    struct Key: Hashable {
      var task: String
      var group: String
    }
    // Events name tasks, they do not identify them: tasks of one name are told apart by time.
    var pending: [Key: [Pending]] = [:]
    var slices: [Slice] = []
    var markers: [Marker] = []
    var begin: ContinuousClock.Instant?
    var end: ContinuousClock.Instant?
    var outcome: Outcome?
    // Events come in delivery order; each delivery stamps its batch with one instant. A start
    // delivered in a batch with other events may have happened well before its stamp, though
    // after the previous delivery: there, lanes may move it back (see `assignLanes`).
    var perStamp: [ContinuousClock.Instant: Int] = [:]
    for event in job.events {
      perStamp[event.at, default: 0] += 1
    }
    var delivery: ContinuousClock.Instant?
    var previousDelivery: ContinuousClock.Instant?
    for event in job.events {
      if let last = delivery, event.at > last {
        previousDelivery = last
      }
      delivery = event.at
      let floor = previousDelivery ?? event.at
      switch event {
      case .started(let at):
        begin = at
      case .taskTracked(let task, let group, let at):
        pending[Key(task: task, group: group), default: []].append(
          Pending(tracked: at, floor: floor, batched: perStamp[at, default: 0] > 1))
      case .taskStarted(let task, let group, let at):
        let key = Key(task: task, group: group)
        let batched = perStamp[at, default: 0] > 1
        if let index = pending[key]?.firstIndex(where: { $0.started == nil }) {
          pending[key]![index].started = at
          pending[key]![index].floor = max(pending[key]![index].floor, floor)
          pending[key]![index].batched = batched
        } else {
          pending[key, default: []].append(Pending(tracked: at, started: at, floor: floor, batched: batched))
        }
      case .taskFinished(let task, let group, let duration, let taskOutcome, let at):
        let key = Key(task: task, group: group)
        // The run that started closest to `at - duration`: that is when the task began, give or
        // take the delays of delivering its events.
        let estimate = at - duration
        var sliceEnd = at
        var waited: Double?
        var earliest: Double?
        if let runs = pending[key], !runs.isEmpty {
          let index = runs.indices.min(by: {
            abs(((runs[$0].started ?? runs[$0].tracked) - estimate).seconds)
              < abs(((runs[$1].started ?? runs[$1].tracked) - estimate).seconds)
          })!
          let run = pending[key]!.remove(at: index)
          sliceEnd = min(at, (run.started ?? run.tracked) + duration)
          waited = run.started.map { ($0 - run.tracked).seconds }
          earliest = run.batched ? seconds(run.floor) : nil
        }
        slices.append(
          Slice(
            task: task, group: group, begin: seconds(sliceEnd - duration), duration: duration.seconds,
            outcome: taskOutcome, waited: waited, earliest: earliest))
      case .groupFinished(let group, let at):
        markers.append(Marker(kind: .groupFinished(group), at: seconds(at)))
      case .allTasksFinished(let at):
        markers.append(Marker(kind: .allTasksFinished, at: seconds(at)))
      case .finished(let jobOutcome, let at):
        end = at
        outcome = jobOutcome
      }
    }
    if let reached = job.timeLimitReached {
      markers.append(Marker(kind: .timeLimitReached, at: seconds(reached)))
    }
    let lanes = assignLanes(&slices)
    let first = begin ?? job.events.first?.at
    let last = end ?? job.events.last?.at
    let trackBegin = first.map(seconds) ?? 0
    let trackEnd = max(last.map(seconds) ?? 0, slices.map(\.end).max() ?? 0)
    return Track(
      id: job.id, name: job.name, type: job.type, parent: job.parent, depth: 0,
      begin: min(trackBegin, slices.map(\.begin).min() ?? trackBegin), end: trackEnd, outcome: outcome,
      slices: slices, lanes: lanes, markers: markers)
  }

  /// Gives each slice a lane, so that slices of one lane never overlap, and sorts them by start.
  /// Returns the number of lanes.
  ///
  /// Event timestamps are delivery times: a task's start is delivered when it happened or
  /// later, batched with the events other threads recorded meanwhile, so a burst of short tasks
  /// can share one start stamp although they ran one after another. Slices are therefore placed
  /// from the latest end backwards, each on the first lane whose next slice begins after it
  /// ends; if none has room, the slice moves back to end where a lane's next slice begins, as
  /// long as it then begins no earlier than its ``Slice/earliest`` (the delivery before the
  /// batch that brought its start; a slice delivered alone does not move). A slice is never
  /// moved later, and keeps its duration.
  static func assignLanes(_ slices: inout [Slice]) -> Int {
    slices.sort { ($0.end, $0.begin) > ($1.end, $1.begin) }
    // Where each lane's earliest placed slice begins.
    var laneStarts: [Double] = []
    for index in slices.indices {
      let slice = slices[index]
      if let lane = laneStarts.firstIndex(where: { $0 >= slice.end }) {
        slices[index].lane = lane
        laneStarts[lane] = slice.begin
      } else if let earliest = slice.earliest,
        let lane = laneStarts.firstIndex(where: { $0 - slice.duration >= earliest })
      {
        slices[index].lane = lane
        slices[index].begin = laneStarts[lane] - slice.duration
        laneStarts[lane] = slices[index].begin
      } else {
        slices[index].lane = laneStarts.count
        laneStarts.append(slice.begin)
      }
    }
    slices.sort { ($0.begin, $0.lane) < ($1.begin, $1.lane) }
    return laneStarts.count
  }
}
