package interp_test

import (
	"fmt"

	"github.com/prodigy-action/prodigy-action/interp"
)

func ExampleInterpolateShell() {
	vars := interp.Vars{"item": map[string]any{"file": "it's $(rm -rf ~).txt"}}
	script, env, err := interp.InterpolateShell(`echo ${item.file} "${item.file}" '${item.file}'`, vars, interp.ShellOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(script)
	fmt.Println(env)
	// Output:
	// echo "${__PRODIGY_V_0}" "${__PRODIGY_V_0}" ''"${__PRODIGY_V_0}"''
	// [__PRODIGY_V_0=it's $(rm -rf ~).txt]
}
