module benchworker

go 1.19

require github.com/docket/docket/clients/go v0.0.0

replace github.com/docket/docket/clients/go => ../../../clients/go
