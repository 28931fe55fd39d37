%% HTTP to docket with OTP's httpc: where the server is, the token, and docket's error codes
%% turned into the errors progressor returns.
-module(docket_progressor_http).

-export([config/1, request/5]).

-define(DEFAULT_SERVER, "http://127.0.0.1:7070").
%% Longer than any sane process_step_timeout: docket answers 504 `timeout` itself when a step
%% overruns, and that answer should reach the caller rather than an httpc timeout.
-define(DEFAULT_TIMEOUT, 300000).

-type config() :: #{
    server := string(),
    token := binary() | undefined,
    ca_file := string() | undefined,
    timeout := timeout()
}.
-export_type([config/0]).

%% A request's `options` map wins, then the application env of `docket_progressor`, then the
%% DOCKET_SERVER / DOCKET_TOKEN / DOCKET_CA_FILE variables, then the defaults.
-spec config(map()) -> config().
config(Req) ->
    Opts = maps:get(options, Req, #{}),
    Get = fun(Key, Env, Default) ->
        case maps:find(Key, Opts) of
            {ok, V} ->
                V;
            error ->
                case application:get_env(docket_progressor, Key) of
                    {ok, V} -> V;
                    undefined when Env =:= none -> Default;
                    undefined ->
                        case os:getenv(Env) of
                            false -> Default;
                            "" -> Default;
                            V -> V
                        end
                end
        end
    end,
    #{
        server => string:trim(to_list(Get(server, "DOCKET_SERVER", ?DEFAULT_SERVER)), trailing, "/"),
        token => to_bin(Get(token, "DOCKET_TOKEN", undefined)),
        ca_file => to_list(Get(ca_file, "DOCKET_CA_FILE", undefined)),
        timeout => Get(timeout, none, ?DEFAULT_TIMEOUT)
    }.

%% Path is a list of segments (each percent-encoded here), Query a list of {Name, Value}.
-spec request(get | post | put, [term()], [{string(), string()}], term() | undefined, config()) ->
    {ok, term()} | {error, term()}.
request(Method, Path, Query, Body, #{server := Server, timeout := Timeout} = Cfg) ->
    {ok, _} = application:ensure_all_started(inets),
    Url = lists:flatten([Server, [["/", quote(to_bin(S))] || S <- Path], query(Query)]),
    Headers = [{"accept", "application/json"} | auth(Cfg)],
    HttpReq =
        case Body of
            undefined when Method =:= get -> {Url, Headers};
            undefined -> {Url, Headers, "application/json", <<"{}">>};
            _ -> {Url, Headers, "application/json", docket_progressor_json:encode(Body)}
        end,
    HttpOpts = [{timeout, Timeout}, {connect_timeout, 10000}, {autoredirect, false} | ssl(Url, Cfg)],
    case httpc:request(Method, HttpReq, HttpOpts, [{body_format, binary}], profile(Cfg)) of
        {ok, {{_, Status, _}, _, RespBody}} when Status >= 200, Status < 300 ->
            {ok, json(RespBody)};
        {ok, {{_, Status, _}, _, RespBody}} ->
            {error, error_reason(Status, json(RespBody))};
        {error, Reason} ->
            {error, {http, Reason}}
    end.

%% httpc reuses a kept-alive connection to the same host whatever the request's ssl options
%% say, so a connection opened trusting one CA file would serve a request made with another:
%% one httpc profile (its own connection pool) per CA file.
profile(#{ca_file := CaFile}) ->
    Name =
        case CaFile of
            undefined -> docket_progressor;
            _ -> list_to_atom("docket_progressor_" ++ integer_to_list(erlang:phash2(CaFile)))
        end,
    case inets:start(httpc, [{profile, Name}]) of
        {ok, _} -> ok;
        {error, {already_started, _}} -> ok
    end,
    %% By default httpc queues a request behind one in flight on a kept-alive connection: a
    %% get/1 would wait for another process's call/1 to finish its processor step. With no
    %% queue, a busy connection is never chosen; idle ones are still reused. Set on every
    %% request: whoever started the profile may not have set them yet.
    ok = httpc:set_options([{max_keep_alive_length, 0}, {max_pipeline_length, 0}], Name),
    Name.

json(<<>>) ->
    #{};
json(Bin) ->
    try
        docket_progressor_json:decode(Bin)
    catch
        _:_ -> Bin
    end.

%% progressor's own error values where docket has the same condition; the processor's error
%% (422 processor_error) is handed back as the processor gave it.
error_reason(_, #{<<"error">> := #{<<"code">> := Code} = E}) ->
    Message = maps:get(<<"message">>, E, <<>>),
    case Code of
        <<"processor_error">> -> docket_progressor_json:from_json(maps:get(<<"details">>, E, null));
        <<"process_not_found">> -> <<"process not found">>;
        <<"namespace_not_found">> -> <<"namespace not found">>;
        <<"process_exists">> -> <<"process already exists">>;
        <<"process_is_running">> -> <<"process is running">>;
        <<"process_not_running">> -> process_is(Message);
        <<"timeout">> -> <<"timeout">>;
        _ -> {docket, Code, Message}
    end;
error_reason(Status, Body) ->
    {http_status, Status, Body}.

%% docket's message is progressor's "process is <status>"; keep it when it has that form.
process_is(<<"process is ", _/binary>> = M) -> M;
process_is(_) -> <<"process is error">>.

auth(#{token := undefined}) -> [];
auth(#{token := Token}) -> [{"authorization", "Bearer " ++ binary_to_list(Token)}].

ssl("https:" ++ _, #{ca_file := CaFile}) ->
    {ok, _} = application:ensure_all_started(ssl),
    Trust =
        case CaFile of
            undefined -> [{cacerts, public_key:cacerts_get()}];
            _ -> [{cacertfile, CaFile}]
        end,
    Https = public_key:pkix_verify_hostname_match_fun(https),
    [{ssl, [{verify, verify_peer},
            {customize_hostname_check, [{match_fun, fun(Ref, Presented) -> match_host(Ref, Presented, Https) end}]}
            | Trust]}];
ssl(_, _) ->
    [].

%% httpc hands ssl an IP literal as a DNS name, which no certificate's DNS names match; such a
%% host must match one of the certificate's IP addresses instead.
match_host({dns_id, Host}, Presented, Https) ->
    case inet:parse_strict_address(Host) of
        {ok, IP} ->
            case Presented of
                {iPAddress, Bytes} -> Bytes =:= ip_bytes(IP);
                _ -> false
            end;
        {error, _} ->
            Https({dns_id, Host}, Presented)
    end;
match_host(Ref, Presented, Https) ->
    Https(Ref, Presented).

ip_bytes({A, B, C, D}) -> [A, B, C, D];
ip_bytes(IPv6) -> binary_to_list(<< <<W:16>> || W <- tuple_to_list(IPv6) >>).

query([]) ->
    "";
query(Params) ->
    ["?", lists:join("&", [[K, "=", quote(to_bin(V))] || {K, V} <- Params])].

%% Every byte but RFC 3986's unreserved ones, so ids with '/', '?' or non-ASCII stay one segment.
quote(Bin) ->
    [quote_byte(B) || <<B>> <= Bin].

quote_byte(B) when B >= $a, B =< $z; B >= $A, B =< $Z; B >= $0, B =< $9;
                   B =:= $-; B =:= $.; B =:= $_; B =:= $~ ->
    [B];
quote_byte(B) ->
    io_lib:format("%~2.16.0B", [B]).

to_bin(undefined) -> undefined;
to_bin(B) when is_binary(B) -> B;
to_bin(A) when is_atom(A) -> atom_to_binary(A, utf8);
to_bin(I) when is_integer(I) -> integer_to_binary(I);
to_bin(L) when is_list(L) -> unicode:characters_to_binary(L).

to_list(undefined) -> undefined;
to_list(B) when is_binary(B) -> binary_to_list(B);
to_list(L) when is_list(L) -> L.
