module github.com/docket/docket/clients/go

go 1.19
