%% Serves a progressor processor module (Module:process({TaskType, Args, Process}, Options,
%% Context) -> {ok, Intent} | {error, Reason}) as a docket processor: docket POSTs its
%% processor request here and gets the intent back as a processor result. Runs on OTP's
%% inets httpd; give the namespace's processor the URL http://IP:PORT/.
-module(docket_progressor_processor).

-export([start/1, stop/1, port/1]).
-export([handle/2]).
%% httpd callback
-export([do/1]).

-include_lib("inets/include/httpd.hrl").

-type start_opts() :: #{
    handler := {module(), term()},
    port => inet:port_number(),
    ip => inet:ip_address()
}.

%% Port 0 (the default) takes a free port; port/1 says which.
-spec start(start_opts()) -> {ok, pid()} | {error, term()}.
start(#{handler := {Module, _} = Handler} = Opts) when is_atom(Module) ->
    {ok, _} = application:ensure_all_started(inets),
    {ok, Cwd} = file:get_cwd(),
    inets:start(httpd, [
        {port, maps:get(port, Opts, 0)},
        {bind_address, maps:get(ip, Opts, {127, 0, 0, 1})},
        {server_name, "docket_progressor_processor"},
        %% httpd insists on both; nothing is served from them (this module answers everything).
        {server_root, Cwd},
        {document_root, Cwd},
        {modules, [?MODULE]},
        {docket_progressor_handler, Handler}
    ]).

-spec stop(pid()) -> ok | {error, term()}.
stop(Pid) ->
    inets:stop(httpd, Pid).

-spec port(pid()) -> inet:port_number().
port(Pid) ->
    proplists:get_value(port, httpd:info(Pid)).

do(#mod{method = "POST", entity_body = Body, config_db = Db}) ->
    Reply = handle(iolist_to_binary(Body), httpd_util:lookup(Db, docket_progressor_handler)),
    respond(200, Reply);
do(#mod{}) ->
    respond(405, <<"{\"error\":\"POST a processor request\"}">>).

respond(Code, Body) ->
    Headers = [
        {code, Code},
        {content_type, "application/json"},
        {content_length, integer_to_list(byte_size(Body))}
    ],
    {proceed, [{response, {response, Headers, [Body]}}]}.

%% docket's processor request (JSON) in, processor result or {"error": ...} (JSON) out.
-spec handle(binary(), {module(), term()}) -> binary().
handle(RequestJson, {Module, Options}) ->
    Req = docket_progressor_json:decode(RequestJson),
    #{<<"task_type">> := Type, <<"process">> := P} = Req,
    Process0 = docket_progressor:process(P),
    Id = maps:get(process_id, Process0),
    Process = Process0#{
        history => [docket_progressor:event(E, Id) || E <- maps:get(<<"history">>, P, [])],
        last_event_id => maps:get(<<"last_event_id">>, P, 0)
    },
    Request = {task_type(Type), opaque(maps:get(<<"args">>, Req, null)), Process},
    Result =
        try Module:process(Request, Options, opaque(maps:get(<<"context">>, Req, null))) of
            {ok, _} = Ok -> Ok;
            {error, _} = Error -> Error;
            _ -> {error, <<"unsupported_result">>}
        catch
            Class:Term -> {error, {exception, Class, Term}}
        end,
    docket_progressor_json:encode(reply(Result)).

task_type(<<"init">>) -> init;
task_type(<<"call">>) -> call;
task_type(<<"repair">>) -> repair;
task_type(<<"timeout">>) -> timeout.

%% progressor gives processors <<>> for absent args and context (timers have neither).
opaque(null) -> <<>>;
opaque(V) -> docket_progressor_json:from_json(V).

reply({ok, Intent}) when is_map(Intent) ->
    try
        intent(Intent)
    catch
        throw:{not_encodable, T} -> #{<<"error">> => error_text({not_encodable, T})}
    end;
reply({error, Reason}) ->
    try
        #{<<"error">> => docket_progressor_json:to_json(Reason)}
    catch
        %% A tuple (an exception, say) has no JSON form: its printed form, which is also the
        %% detail progressor would store for it.
        throw:{not_encodable, _} -> #{<<"error">> => error_text(Reason)}
    end;
reply(_) ->
    #{<<"error">> => <<"unsupported_result">>}.

%% Events' event_id and timestamp are not sent: docket numbers and stamps events itself.
intent(Intent) ->
    Json = fun docket_progressor_json:to_json/1,
    Fields = [
        {<<"aux_state">>, aux_state, Json},
        {<<"metadata">>, metadata, fun docket_progressor_json:metadata/1},
        {<<"response">>, response, Json},
        {<<"action">>, action, fun action/1}
    ],
    lists:foldl(
        fun({JK, K, F}, Acc) ->
            case maps:find(K, Intent) of
                {ok, V} -> Acc#{JK => F(V)};
                error -> Acc
            end
        end,
        #{<<"events">> => [new_event(E) || E <- maps:get(events, Intent, [])]},
        Fields
    ).

new_event(E) ->
    #{
        <<"payload">> => docket_progressor_json:to_json(maps:get(payload, E, null)),
        <<"metadata">> => docket_progressor_json:metadata(maps:get(metadata, E, #{}))
    }.

action(undefined) ->
    null;
action(unset_timer) ->
    <<"unset_timer">>;
action(#{set_timer := At} = A) ->
    #{<<"set_timer">> => docket_progressor_json:to_rfc3339(At), <<"remove">> => maps:get(remove, A, false)};
%% progressor removes at once on #{remove := true} without a time.
action(#{remove := true}) ->
    #{<<"timeout">> => <<"0s">>, <<"remove">> => true}.

%% As progressor's prg_utils:format/1 prints a reason for a process's detail.
error_text(T) ->
    unicode:characters_to_binary(io_lib:format("~64000p", [T])).
