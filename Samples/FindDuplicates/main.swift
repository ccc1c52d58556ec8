print("find-duplicates: coming")
