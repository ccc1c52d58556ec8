print("pipeline: not written yet")
