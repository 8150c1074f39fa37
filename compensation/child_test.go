package compensation_test

const childEnv = "LH_COMP_CHILD"

func runChild(scenario string) int { return 2 }
