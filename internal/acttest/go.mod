module github.com/prodigy-action/prodigy-action/internal/acttest

go 1.25.0

require (
	github.com/julienschmidt/httprouter v1.3.0
	github.com/nektos/act v0.2.87
	github.com/prodigy-action/prodigy-action v0.0.0-00010101000000-000000000000
)

require (
	cyphar.com/go-pathrs v0.2.6 // indirect
	github.com/golang-jwt/jwt/v5 v5.3.0 // indirect
	github.com/google/go-github/v60 v60.0.0 // indirect
	github.com/google/go-querystring v1.1.0 // indirect
	github.com/sethvargo/go-githubactions v1.4.0 // indirect
	github.com/sirupsen/logrus v1.9.3 // indirect
	golang.org/x/sys v0.46.0 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)

replace github.com/prodigy-action/prodigy-action => ../..
