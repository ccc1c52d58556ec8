print("command-script: not written yet")
